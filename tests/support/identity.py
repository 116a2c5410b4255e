"""The identity providers the secure Apache broker trusts beside its own tokens: an OpenID
Connect issuer (:mod:`.oidc`) and a Kerberos realm (:mod:`.kdc`).

:class:`IdentityProviders` starts both for one broker, before its first start, and stops them
at its teardown; they outlive the broker's restarts. It gives the broker's settings and JVM
flags (:meth:`~IdentityProviders.broker_settings`, :meth:`~IdentityProviders.jvm_flags`):

- **OAuth2 / OpenID Connect**: ``AuthenticationProviderOpenID`` trusts the issuer's tokens for
  :data:`AUDIENCE`. The issuer has one client, :data:`CLIENT` (its tokens' subject and so the
  role, the basic user's role too), whose credentials file is :attr:`credentials_file`
  (``client_id`` and ``client_secret``, as a ``privateKey`` names it).
- **Kerberos**: ``AuthenticationProviderSasl`` logs the broker in as ``broker/localhost`` from a
  keytab (the JAAS section ``PulsarBroker``); the client principal :attr:`principal`
  (``spark-jobs@PULSAR.TEST``, its own role) has the keytab :attr:`keytab`, and the JAAS file
  :attr:`jaas_file` has a client section ``PulsarClient`` for it, as Java users write one.

Start cost: the issuer is a thread; the realm 0.03 s from the cached Debian packages (about
1.5 s the first time, downloads included).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from .kdc import Kdc
from .oidc import OidcIssuer

__all__ = [
    "AUDIENCE",
    "CLIENT",
    "KERBEROS_USER",
    "OPENID_PROVIDER",
    "SASL_PROVIDER",
    "IdentityProviders",
]

#: The OAuth2 client of the issuer; the role of its tokens.
CLIENT = "spark-jobs"
#: The audience the broker accepts tokens for.
AUDIENCE = "urn:pulsar:test-cluster"
#: The Kerberos client principal's short name.
KERBEROS_USER = "spark-jobs"

OPENID_PROVIDER = "org.apache.pulsar.broker.authentication.oidc.AuthenticationProviderOpenID"
SASL_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderSasl"


class IdentityProviders:
    """An OpenID Connect issuer and a Kerberos realm for one broker, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.client_secret = secrets.token_urlsafe(24)
        self.oidc = OidcIssuer({CLIENT: self.client_secret}, audience=AUDIENCE)
        self.kdc = Kdc(self.directory / "kdc")
        self.credentials_file = self.directory / "oauth2-credentials.json"
        self.jaas_file = self.directory / "jaas.conf"
        self.keytab = self.directory / "spark-jobs.keytab"
        self.broker_keytab = self.directory / "broker.keytab"
        self.role_token_secret = self.directory / "sasl-role-token.key"
        self.started = False

    @property
    def principal(self) -> str:
        """The Kerberos client principal (and its role)."""
        return self.kdc.principal(KERBEROS_USER)

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles that need permissions on ``public/default``."""
        return (CLIENT, self.principal)

    def start(self) -> IdentityProviders:
        """Start the issuer and the KDC and write the files (once)."""
        if self.started:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        self.oidc.start()
        self.kdc.start()
        self.kdc.add_principal("broker/localhost", keytab=self.broker_keytab)
        self.kdc.add_principal(KERBEROS_USER, keytab=self.keytab)
        self._private(
            self.credentials_file,
            json.dumps({"client_id": CLIENT, "client_secret": self.client_secret}).encode(),
        )
        self._private(self.role_token_secret, secrets.token_bytes(32))
        self.jaas_file.write_text(
            "PulsarBroker {\n"
            "  com.sun.security.auth.module.Krb5LoginModule required\n"
            "  useKeyTab=true storeKey=true useTicketCache=false\n"
            f'  keyTab="{self.broker_keytab}"\n'
            f'  principal="broker/localhost@{self.kdc.realm}";\n'
            "};\n"
            "PulsarClient {\n"
            "  com.sun.security.auth.module.Krb5LoginModule required\n"
            "  useKeyTab=true storeKey=true useTicketCache=false\n"
            f'  keyTab="{self.keytab}"\n'
            f'  principal="{self.principal}";\n'
            "};\n"
        )
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            self.oidc.close()
            self.kdc.stop()
            self.started = False

    @staticmethod
    def _private(path: Path, data: bytes) -> None:
        path.write_bytes(data)
        path.chmod(0o600)

    def broker_settings(self) -> dict[str, str]:
        """The broker keys of both providers (``authenticationProviders`` not included)."""
        return {
            "openIDAllowedTokenIssuers": self.oidc.url,
            "openIDAllowedAudiences": AUDIENCE,
            # The test issuer speaks plain HTTP on loopback; a real one is https.
            "openIDRequireIssuersUseHttps": "false",
            # A token signed with a key the broker's JWKS cache does not know makes it
            # fetch the JWKS again at most this often (default 300 s): at once here.
            "openIDKeyIdCacheMissRefreshSeconds": "0",
            "saslJaasServerSectionName": "PulsarBroker",
            # Every principal of the realm may authenticate; authorization decides the rest.
            "saslJaasClientAllowedIds": ".*",
            # Signs the role tokens of SASL over HTTP (the admin API); required.
            "saslJaasServerRoleTokenSignerSecretPath": str(self.role_token_secret),
        }

    def jvm_flags(self) -> list[str]:
        """The broker JVM's JAAS file and krb5.conf."""
        return [f"-Djava.security.auth.login.config={self.jaas_file}", *self.kdc.jvm_flags()]
