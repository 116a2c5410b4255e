"""JAAS login configuration files: the sections Java users write, read for Kerberos."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.client.jaas import (
    KRB5_LOGIN_MODULE,
    JaasError,
    KerberosLogin,
    kerberos_login,
    sections,
)

FILE = """
/* A broker's and a client's sections, as Pulsar's docs show them. */
PulsarBroker {
   com.sun.security.auth.module.Krb5LoginModule required
   useKeyTab=true
   storeKey=true
   useTicketCache=false
   keyTab="/etc/security/keytabs/pulsarbroker.keytab"
   principal="broker/localhost@EXAMPLE.COM";
};
// The client
PulsarClient {
   com.sun.security.auth.module.Krb5LoginModule required
   useKeyTab=true storeKey=true useTicketCache=false
   keyTab="/etc/security/keytabs/pulsarclient.keytab"
   principal="client/localhost@EXAMPLE.COM";
};
FromKinit {
   org.example.AuditModule optional;
   com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true
   ticketCache="/tmp/krb5cc_1000";
};
"""


def test_the_sections_and_their_kerberos_logins(tmp_path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(FILE)
    assert sorted(sections(FILE)) == ["FromKinit", "PulsarBroker", "PulsarClient"]
    assert kerberos_login(str(path)) == KerberosLogin(
        principal="client/localhost@EXAMPLE.COM",
        keytab="/etc/security/keytabs/pulsarclient.keytab",
    )
    assert kerberos_login(str(path), "FromKinit") == KerberosLogin(
        use_ticket_cache=True, ticket_cache="/tmp/krb5cc_1000"
    )


@pytest.mark.parametrize(
    ("text", "section", "message"),
    [
        (FILE, "Nope", r"has no section 'Nope' \(saslJaasClientSectionName\); its sections: "
                       r"FromKinit, PulsarBroker, PulsarClient"),
        ("A { x.Y required; };", "A", rf"section 'A' has no {KRB5_LOGIN_MODULE}"),
        (f"A {{ {KRB5_LOGIN_MODULE} required useKeyTab=true; }};", "A", "needs keyTab"),
        (f"A {{ {KRB5_LOGIN_MODULE} required; }};", "A", "or useTicketCache=true"),
        (f"A {{ {KRB5_LOGIN_MODULE} required keyTab; }};", "A", "option 'keyTab' .* no '='"),
        (f"A {{ {KRB5_LOGIN_MODULE} required", "A", "the file ends"),
        ("A ( }", "A", "does not open with"),
    ],
)  # fmt: skip
def test_a_file_without_a_usable_login_is_named(tmp_path, text, section, message) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(JaasError, match=message) as info:
        kerberos_login(str(path), section)
    assert str(path) in str(info.value)


def test_a_missing_file_is_named(tmp_path) -> None:
    with pytest.raises(JaasError, match=r"cannot read JAAS file .*nowhere\.conf"):
        kerberos_login(str(tmp_path / "nowhere.conf"))


#: A login module: a Java class name.
_class_name = st.from_regex(
    r"[a-zA-Z][a-zA-Z0-9_$]{0,8}(\.[a-zA-Z][a-zA-Z0-9_$]{0,8}){0,3}", fullmatch=True
)


@given(
    st.dictionaries(
        st.text(st.sampled_from("abcdefXYZ"), min_size=1, max_size=8),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
        max_size=5,
    ),
    _class_name,
)
def test_quoted_option_values_come_back_as_written(options, name) -> None:
    written = " ".join(
        f'{k}="' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for k, v in options.items()
    )
    text = f"S {{ {name} required {written}; }};"
    assert sections(text) == {"S": [(name, "required", options)]}
