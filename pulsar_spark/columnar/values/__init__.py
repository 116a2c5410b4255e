"""Typed values: each format's Arrow types, decoders and encoders, and the switch between them."""
