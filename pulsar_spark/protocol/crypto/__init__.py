"""End-to-end encryption on the wire: metadata fields, key wrapping, encryption, decryption."""
