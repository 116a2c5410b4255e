"""Kerberos for SASL: a GSSAPI initiator over MIT Kerberos' ``libgssapi_krb5``, by ctypes.

No compiled dependency: the ``gssapi`` package of PyPI ships no Linux wheels, so this
module calls the system's ``libgssapi_krb5.so.2`` directly (Debian/Ubuntu package
``libgssapi-krb5-2``, RHEL ``krb5-libs``). Everything Kerberos does (the krb5.conf of
``$KRB5_CONFIG``, the KDC exchanges, ticket caches, replay caches) is the library's.

The flow
--------

1. :class:`KerberosCredentials` names *who* authenticates: a principal and keytab, a
   ticket cache, or the default credentials (``$KRB5CCNAME``, as after ``kinit``). It
   acquires a GSS credential lazily, on first use, and shares it among connections and
   threads. With a keytab the tickets live in a ``MEMORY:`` cache of the object's own
   (``gss_acquire_cred_from`` with the store keys ``client_keytab`` and ``ccache``), and
   krb5 gets a TGT from the keytab whenever the cache holds no valid one on acquisition.
   A handle held past its TGT's expiry is not renewed by krb5 (1.20 fails it with
   "Ticket expired"), so the object acquires its handle again once it is halfway to
   expiry (and a ticket cache without keytab once it has expired: a ``kinit`` meanwhile
   is picked up).
   Should a context still report an expired ticket, the handle is acquired anew and the
   step retried once. A handle in use by a context is never released under it.
2. :class:`SaslGssapiClient` runs the SASL ``GSSAPI`` mechanism of RFC 4752 against one
   service (``service@host``, a host-based name: ``broker@localhost`` is the principal
   ``broker/localhost@REALM``), the way Java's ``SaslClient`` does it:

   * :meth:`~SaslGssapiClient.initial_response`: the first ``gss_init_sec_context``
     token (an AP-REQ; mutual authentication and sequence checking requested);
   * :meth:`~SaslGssapiClient.evaluate_challenge`, while the context is not
     established: the server's token (the AP-REP) goes into ``gss_init_sec_context``;
     its output (usually empty) is the response;
   * then the server's security-layer offer: ``gss_unwrap`` of 4 bytes (a bit mask of
     layers, a 3-byte maximum buffer size). The client takes layer 1 ("none"), maximum
     buffer 0 and no authorization id, and answers ``gss_wrap`` (integrity only) of
     those 4 bytes; :attr:`~SaslGssapiClient.complete` turns true and the GSS context is
     deleted.

Errors are :class:`KerberosError` (a :class:`~pulsar_spark.client.errors.ClientError`):
the message names the principal, keytab and service principal at fault and the GSS
major and minor status text (``Keytab contains no suitable keys``, ``Server not found
in Kerberos database``, ``Clock skew too great``, ...); no key material, no handles.
A machine without the library gets :class:`KerberosUnavailable` on first use.

The low-level layer
-------------------

The ctypes declarations are public so that other code (the test suite's acceptor) uses
the same prototypes:

* :func:`gss_library` loads the library once, declares ``argtypes``/``restype`` of every
  function named in :data:`FUNCTIONS` and returns a :class:`GssLibrary`: the
  ``ctypes.CDLL`` (``.lib``) and the exported OIDs (``mech_krb5``,
  ``nt_hostbased_service``, ``nt_user_name``, ``nt_krb5_name``);
* the C structures :class:`GssBuffer` (``gss_buffer_desc``), :class:`GssOid`,
  :class:`GssOidSet`, :class:`GssKeyValueElement` and :class:`GssKeyValueSet` (the
  credential store of ``gss_acquire_cred_from``); handles (``gss_name_t``,
  ``gss_cred_id_t``, ``gss_ctx_id_t``) are ``ctypes.c_void_p``;
* the constants ``GSS_C_*`` / ``GSS_S_*`` used here and :func:`gss_error`;
* helpers that free what the library allocates: :func:`take_buffer` (copies a
  ``GssBuffer`` the library filled and releases it), :func:`input_buffer`,
  :func:`import_name`, :func:`display_name`, :func:`release_name`, :func:`release_cred`,
  :func:`delete_context`, :func:`credential_store`, :func:`krb5_mechs` and
  :func:`status_text` (``gss_display_status`` of a major and a minor code).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from .errors import ClientError

__all__ = [
    "FUNCTIONS",
    "GSS_C_ACCEPT",
    "GSS_C_BOTH",
    "GSS_C_GSS_CODE",
    "GSS_C_INDEFINITE",
    "GSS_C_INITIATE",
    "GSS_C_MECH_CODE",
    "GSS_C_MUTUAL_FLAG",
    "GSS_C_SEQUENCE_FLAG",
    "GSS_S_COMPLETE",
    "GSS_S_CONTINUE_NEEDED",
    "GSS_S_CREDENTIALS_EXPIRED",
    "GSS_S_NO_CRED",
    "LIBRARY_NAME",
    "SASL_LAYER_NONE",
    "GssBuffer",
    "GssKeyValueElement",
    "GssKeyValueSet",
    "GssLibrary",
    "GssOid",
    "GssOidSet",
    "KerberosCredentials",
    "KerberosError",
    "KerberosUnavailable",
    "OM_uint32",
    "SaslGssapiClient",
    "credential_store",
    "delete_context",
    "display_name",
    "gss_error",
    "gss_library",
    "import_name",
    "input_buffer",
    "krb5_mechs",
    "release_cred",
    "release_name",
    "status_text",
    "take_buffer",
]

#: The MIT library's soname.
LIBRARY_NAME = "libgssapi_krb5.so.2"

# ---------------------------------------------------------------------------
# C types
# ---------------------------------------------------------------------------

#: ``OM_uint32``: status codes, flags, lifetimes.
OM_uint32 = ctypes.c_uint32


class GssBuffer(ctypes.Structure):
    """``gss_buffer_desc``: ``length`` bytes at ``value``."""

    _fields_ = [("length", ctypes.c_size_t), ("value", ctypes.c_void_p)]


class GssOid(ctypes.Structure):
    """``gss_OID_desc``: a DER-encoded object identifier."""

    _fields_ = [("length", OM_uint32), ("elements", ctypes.c_void_p)]


class GssOidSet(ctypes.Structure):
    """``gss_OID_set_desc``: ``count`` OIDs."""

    _fields_ = [("count", ctypes.c_size_t), ("elements", ctypes.POINTER(GssOid))]


class GssKeyValueElement(ctypes.Structure):
    """``gss_key_value_element_desc``: one credential-store entry."""

    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class GssKeyValueSet(ctypes.Structure):
    """``gss_key_value_set_desc``: a credential store (``client_keytab``, ``ccache``, ...)."""

    _fields_ = [("count", OM_uint32), ("elements", ctypes.POINTER(GssKeyValueElement))]


_OID_P = ctypes.POINTER(GssOid)
_BUF_P = ctypes.POINTER(GssBuffer)
_U32_P = ctypes.POINTER(OM_uint32)
_HANDLE_P = ctypes.POINTER(ctypes.c_void_p)
_INT_P = ctypes.POINTER(ctypes.c_int)
_H = ctypes.c_void_p

# ---------------------------------------------------------------------------
# Constants (gssapi.h)
# ---------------------------------------------------------------------------

GSS_S_COMPLETE = 0
#: Supplementary bit: call again with the peer's next token.
GSS_S_CONTINUE_NEEDED = 1
#: Routine error 7: no credentials were supplied or they are unavailable.
GSS_S_NO_CRED = 7 << 16
#: Routine error 11: the credentials have expired.
GSS_S_CREDENTIALS_EXPIRED = 11 << 16
_GSS_ERROR_MASK = 0xFFFF0000  # calling (bits 24-31) and routine (bits 16-23) errors

GSS_C_GSS_CODE = 1
GSS_C_MECH_CODE = 2
GSS_C_BOTH = 0
GSS_C_INITIATE = 1
GSS_C_ACCEPT = 2
GSS_C_INDEFINITE = 0xFFFFFFFF
GSS_C_MUTUAL_FLAG = 2
GSS_C_SEQUENCE_FLAG = 8

#: RFC 4752 security layer bit "no security layer".
SASL_LAYER_NONE = 1

#: Every function :func:`gss_library` declares: ``name -> (restype, argtypes)``.
FUNCTIONS: dict[str, tuple[Any, tuple[Any, ...]]] = {
    # (minor, input_name, name_type, output_name)
    "gss_import_name": (OM_uint32, (_U32_P, _BUF_P, _OID_P, _HANDLE_P)),
    # (minor, name, output_buffer, output_name_type)
    "gss_display_name": (OM_uint32, (_U32_P, _H, _BUF_P, ctypes.POINTER(_OID_P))),
    # (minor, desired_name, time_req, desired_mechs, usage, cred_store, cred, mechs, time_rec)
    "gss_acquire_cred_from": (
        OM_uint32,
        (
            _U32_P,
            _H,
            OM_uint32,
            ctypes.POINTER(GssOidSet),
            ctypes.c_int,
            ctypes.POINTER(GssKeyValueSet),
            _HANDLE_P,
            ctypes.c_void_p,
            _U32_P,
        ),
    ),
    # (minor, desired_name, time_req, desired_mechs, usage, cred, mechs, time_rec)
    "gss_acquire_cred": (
        OM_uint32,
        (
            _U32_P,
            _H,
            OM_uint32,
            ctypes.POINTER(GssOidSet),
            ctypes.c_int,
            _HANDLE_P,
            ctypes.c_void_p,
            _U32_P,
        ),
    ),
    # (minor, cred, name, lifetime, usage, mechanisms)
    "gss_inquire_cred": (
        OM_uint32,
        (_U32_P, _H, _HANDLE_P, _U32_P, _INT_P, ctypes.c_void_p),
    ),
    # (minor, cred, context, target, mech, flags, time_req, bindings, input, actual_mech,
    #  output, ret_flags, time_rec)
    "gss_init_sec_context": (
        OM_uint32,
        (
            _U32_P,
            _H,
            _HANDLE_P,
            _H,
            _OID_P,
            OM_uint32,
            OM_uint32,
            ctypes.c_void_p,
            _BUF_P,
            ctypes.c_void_p,
            _BUF_P,
            _U32_P,
            _U32_P,
        ),
    ),
    # (minor, context, acceptor_cred, input, bindings, src_name, mech, output, ret_flags,
    #  time_rec, delegated_cred)
    "gss_accept_sec_context": (
        OM_uint32,
        (
            _U32_P,
            _HANDLE_P,
            _H,
            _BUF_P,
            ctypes.c_void_p,
            _HANDLE_P,
            ctypes.c_void_p,
            _BUF_P,
            _U32_P,
            _U32_P,
            ctypes.c_void_p,
        ),
    ),
    # (minor, context, conf_req, qop, input, conf_state, output)
    "gss_wrap": (OM_uint32, (_U32_P, _H, ctypes.c_int, OM_uint32, _BUF_P, _INT_P, _BUF_P)),
    # (minor, context, input, output, conf_state, qop_state)
    "gss_unwrap": (OM_uint32, (_U32_P, _H, _BUF_P, _BUF_P, _INT_P, _U32_P)),
    # (minor, status, status_type, mech, message_context, string)
    "gss_display_status": (OM_uint32, (_U32_P, OM_uint32, ctypes.c_int, _OID_P, _U32_P, _BUF_P)),
    "gss_release_buffer": (OM_uint32, (_U32_P, _BUF_P)),
    "gss_release_name": (OM_uint32, (_U32_P, _HANDLE_P)),
    "gss_release_cred": (OM_uint32, (_U32_P, _HANDLE_P)),
    # (minor, context, output_token)
    "gss_delete_sec_context": (OM_uint32, (_U32_P, _HANDLE_P, _BUF_P)),
}


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class KerberosError(ClientError):
    """Kerberos (GSSAPI) authentication failed or was misconfigured; the message names the
    principal, keytab and service at fault and the GSS status text. ``major`` and
    ``minor`` are the GSS status codes when a GSS call failed (else None)."""

    def __init__(self, message: str, *, major: int | None = None, minor: int | None = None):
        super().__init__(message)
        self.major = major
        self.minor = minor


class KerberosUnavailable(KerberosError):
    """MIT Kerberos' ``libgssapi_krb5`` is not installed."""


def gss_error(major: int) -> bool:
    """Whether a major status is an error (``GSS_ERROR``), not a success or a
    supplementary bit such as ``GSS_S_CONTINUE_NEEDED``."""
    return bool(major & _GSS_ERROR_MASK)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


class GssLibrary:
    """The loaded ``libgssapi_krb5`` (``lib``, every function of :data:`FUNCTIONS`
    declared) and its exported OIDs, each a ``POINTER(GssOid)``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name, (restype, argtypes) in FUNCTIONS.items():
            func = getattr(lib, name)
            func.restype = restype
            func.argtypes = argtypes
        #: The Kerberos 5 mechanism (``gss_mech_krb5``).
        self.mech_krb5 = self._oid("gss_mech_krb5")
        #: ``service@host`` names (``GSS_C_NT_HOSTBASED_SERVICE``).
        self.nt_hostbased_service = self._oid("GSS_C_NT_HOSTBASED_SERVICE")
        #: ``GSS_C_NT_USER_NAME``.
        self.nt_user_name = self._oid("GSS_C_NT_USER_NAME")
        #: Kerberos principal names, ``name[/instance][@REALM]`` (``gss_nt_krb5_name``).
        self.nt_krb5_name = self._oid("gss_nt_krb5_name")

    def _oid(self, symbol: str) -> Any:
        # The library exports each OID as a variable holding a gss_OID (a pointer).
        return _OID_P.in_dll(self.lib, symbol)


_LOAD_LOCK = threading.Lock()
_LIBRARY: GssLibrary | None = None


def gss_library() -> GssLibrary:
    """The MIT GSSAPI library, loaded and declared once per process.

    Raises:
        KerberosUnavailable: the library is not installed.
    """
    global _LIBRARY
    if _LIBRARY is not None:
        return _LIBRARY
    with _LOAD_LOCK:
        if _LIBRARY is not None:
            return _LIBRARY
        errors = []
        lib = None
        for candidate in (LIBRARY_NAME, ctypes.util.find_library("gssapi_krb5")):
            if not candidate:
                continue
            try:
                lib = ctypes.CDLL(candidate)
                break
            except OSError as exc:
                errors.append(str(exc))
        if lib is None:
            msg = (
                "Kerberos (SASL/GSSAPI) needs MIT Kerberos' libgssapi_krb5, which is not "
                "installed (Debian/Ubuntu: package libgssapi-krb5-2; RHEL/Fedora: krb5-libs)"
                + (f": {'; '.join(errors)}" if errors else "")
            )
            raise KerberosUnavailable(msg)
        try:
            _LIBRARY = GssLibrary(lib)
        except (AttributeError, ValueError) as exc:
            msg = (
                f"{LIBRARY_NAME} lacks a GSSAPI function or OID this client needs ({exc}); "
                "Kerberos needs MIT Kerberos 1.11 or newer"
            )
            raise KerberosUnavailable(msg) from exc
        return _LIBRARY


# ---------------------------------------------------------------------------
# Helpers that own what the library allocates
# ---------------------------------------------------------------------------


def take_buffer(buffer: GssBuffer) -> bytes:
    """The bytes of a buffer the library filled, which is then released."""
    if not buffer.value:
        return b""
    try:
        return ctypes.string_at(buffer.value, buffer.length)
    finally:
        minor = OM_uint32()
        gss_library().lib.gss_release_buffer(ctypes.byref(minor), ctypes.byref(buffer))


def input_buffer(data: bytes) -> tuple[GssBuffer, Any]:
    """A ``GssBuffer`` over a copy of ``data`` and the object keeping that copy alive
    (hold both for the length of the call)."""
    keep = ctypes.create_string_buffer(data, len(data))
    return GssBuffer(len(data), ctypes.cast(keep, ctypes.c_void_p)), keep


def status_text(major: int, minor: int = 0) -> str:
    """``gss_display_status`` of a major code and (when not 0) a minor code: e.g.
    ``"Server not found in Kerberos database (GSS: Unspecified GSS failure. ...)"``.

    Call it on the thread that got the codes, right away: MIT keeps the detailed text of
    the last minor code per thread."""
    gss = gss_library()

    def messages(code: int, kind: int) -> list[str]:
        out: list[str] = []
        context = OM_uint32(0)
        for _ in range(16):
            ignored = OM_uint32()
            text = GssBuffer()
            major_status = gss.lib.gss_display_status(
                ctypes.byref(ignored), code, kind, None, ctypes.byref(context), ctypes.byref(text)
            )
            if gss_error(major_status):
                break
            message = take_buffer(text).decode("utf-8", "replace").strip()
            if message:
                out.append(message)
            if context.value == 0:
                break
        return out

    routine = messages(major & _GSS_ERROR_MASK, GSS_C_GSS_CODE) if gss_error(major) else []
    mech = messages(minor, GSS_C_MECH_CODE) if minor else []
    gss_part = "; ".join(routine) or f"major status 0x{major:08x}"
    if mech:
        return f"{'; '.join(mech)} (GSS: {gss_part})"
    return gss_part


def import_name(text: str, name_type: Any) -> ctypes.c_void_p:
    """``gss_import_name``: a ``gss_name_t`` to release with :func:`release_name`.

    Raises:
        KerberosError: the name does not parse.
    """
    gss = gss_library()
    minor = OM_uint32()
    name = ctypes.c_void_p()
    buffer, keep = input_buffer(text.encode("utf-8"))
    major = gss.lib.gss_import_name(
        ctypes.byref(minor), ctypes.byref(buffer), name_type, ctypes.byref(name)
    )
    del keep
    if gss_error(major):
        msg = f"Kerberos: cannot parse the name {text!r}: {status_text(major, minor.value)}"
        raise KerberosError(msg, major=major, minor=minor.value)
    return name


def display_name(name: ctypes.c_void_p) -> str:
    """``gss_display_name`` (``client@PULSAR.TEST``), or ``"?"`` when it fails."""
    gss = gss_library()
    minor = OM_uint32()
    text = GssBuffer()
    major = gss.lib.gss_display_name(ctypes.byref(minor), name, ctypes.byref(text), None)
    if gss_error(major):
        return "?"
    return take_buffer(text).decode("utf-8", "replace")


def release_name(name: ctypes.c_void_p) -> None:
    """``gss_release_name`` (a no-op on a null handle)."""
    if name.value:
        minor = OM_uint32()
        gss_library().lib.gss_release_name(ctypes.byref(minor), ctypes.byref(name))


def release_cred(cred: ctypes.c_void_p) -> None:
    """``gss_release_cred`` (a no-op on a null handle)."""
    if cred.value:
        minor = OM_uint32()
        gss_library().lib.gss_release_cred(ctypes.byref(minor), ctypes.byref(cred))


def delete_context(context: ctypes.c_void_p) -> None:
    """``gss_delete_sec_context`` without an output token (a no-op on a null handle)."""
    if context.value:
        minor = OM_uint32()
        gss_library().lib.gss_delete_sec_context(ctypes.byref(minor), ctypes.byref(context), None)


def credential_store(entries: Mapping[str, str]) -> tuple[GssKeyValueSet, Any]:
    """A ``GssKeyValueSet`` of ``entries`` (``client_keytab``, ``keytab``, ``ccache``,
    ``rcache``, ...) and the object keeping its strings alive."""
    array = (GssKeyValueElement * max(len(entries), 1))()
    for i, (key, value) in enumerate(entries.items()):
        array[i].key = key.encode("utf-8")
        array[i].value = value.encode("utf-8")
    return GssKeyValueSet(len(entries), array), array


def krb5_mechs() -> GssOidSet:
    """A ``GssOidSet`` of the Kerberos 5 mechanism alone (it points into the library)."""
    gss = gss_library()
    return GssOidSet(1, gss.mech_krb5)


# ---------------------------------------------------------------------------
# Credentials
# ---------------------------------------------------------------------------


def _keytab_path(keytab: str) -> str:
    for prefix in ("FILE:", "WRFILE:"):
        if keytab.startswith(prefix):
            return keytab[len(prefix) :]
    return keytab


class _Handle:
    """One acquired ``gss_cred_id_t``, when it was acquired and for how long, and how many
    contexts use it right now: a retired handle is released when its last user is done
    (never under a running call)."""

    def __init__(self, cred: ctypes.c_void_p, lifetime: int) -> None:
        self.cred = cred
        self.acquired_at = time.time()
        #: Seconds the TGT was valid for when acquired (GSS_C_INDEFINITE: unknown).
        self.lifetime = lifetime
        self.users = 0
        self.retired = False

    def due(self, from_keytab: bool) -> bool:
        """Whether to acquire anew: halfway to expiry with a keytab (as krb5's own
        refresh), at expiry without one (someone may have run kinit again)."""
        if self.lifetime == GSS_C_INDEFINITE:
            return False
        age = time.time() - self.acquired_at
        return age >= (self.lifetime / 2 if from_keytab else self.lifetime)


class KerberosCredentials:
    """Who authenticates: a principal with a keytab, a ticket cache, or the defaults.

    * ``keytab`` (with or without ``principal``): tickets are obtained from the keytab
      into a ``MEMORY:`` cache of this object (or ``ccache`` when given); the credential
      is acquired again (a new TGT from the keytab) once it is halfway to expiry, as
      krb5's own refresh does. Without ``principal`` the keytab's first principal is
      used.
    * ``ccache`` alone (``FILE:/tmp/krb5cc_1000``, ``KEYRING:...``): the tickets someone
      else obtained (``kinit``); they are not renewed here, but read again once expired
      (a ``kinit`` meanwhile is picked up).
    * none: the default credentials (``$KRB5CCNAME`` or the default cache).

    The GSS credential is acquired on first use and shared: one object serves any number
    of connections, from any number of threads.

    Raises:
        KerberosError: the keytab file does not exist.
    """

    def __init__(
        self,
        principal: str | None = None,
        keytab: str | None = None,
        ccache: str | None = None,
    ) -> None:
        if keytab is not None and not Path(_keytab_path(keytab)).is_file():
            msg = (
                f"Kerberos keytab {keytab} "
                + (f"(for {principal}) " if principal else "")
                + "does not exist or is not a file"
            )
            raise KerberosError(msg)
        self.principal = principal
        self.keytab = keytab
        #: The ticket cache in use: the one given, this object's own ``MEMORY:`` cache
        #: with a keytab, or None for the default cache.
        self.ccache = ccache
        if keytab is not None and ccache is None:
            self.ccache = f"MEMORY:pulsar-spark-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._current: _Handle | None = None
        self._held: list[_Handle] = []
        self._closed = False
        self._finalizer = weakref.finalize(self, KerberosCredentials._release_all, self._held)
        # Not at interpreter exit: a daemon thread may still be inside a GSS call.
        self._finalizer.atexit = False

    def __repr__(self) -> str:
        return f"KerberosCredentials({self.describe()})"

    def describe(self) -> str:
        """The principal and where its credentials come from, for messages."""
        who = self.principal or (
            "the keytab's principal" if self.keytab else "the default principal"
        )
        where = []
        if self.keytab is not None:
            where.append(f"keytab {self.keytab}")
        if self.ccache is not None and not self.ccache.startswith("MEMORY:pulsar-spark-"):
            where.append(f"ticket cache {self.ccache}")
        if self.keytab is None and self.ccache is None:
            where.append("default ticket cache")
        return f"{who} ({', '.join(where)})"

    @property
    def renewable_from_keytab(self) -> bool:
        """Whether expired tickets are obtained again here (a keytab was given)."""
        return self.keytab is not None

    # -- acquisition ----------------------------------------------------------------

    def _acquire(self) -> _Handle:
        gss = gss_library()
        minor = OM_uint32()
        cred = ctypes.c_void_p()
        lifetime = OM_uint32()
        mechs = krb5_mechs()
        name = ctypes.c_void_p()
        if self.principal is not None:
            name = import_name(self.principal, gss.nt_krb5_name)
        try:
            if self.keytab is None and self.ccache is None:
                major = gss.lib.gss_acquire_cred(
                    ctypes.byref(minor),
                    name,
                    0,
                    ctypes.byref(mechs),
                    GSS_C_INITIATE,
                    ctypes.byref(cred),
                    None,
                    ctypes.byref(lifetime),
                )
            else:
                entries: dict[str, str] = {}
                if self.keytab is not None:
                    entries["client_keytab"] = self.keytab
                if self.ccache is not None:
                    entries["ccache"] = self.ccache
                store, keep = credential_store(entries)
                major = gss.lib.gss_acquire_cred_from(
                    ctypes.byref(minor),
                    name,
                    0,
                    ctypes.byref(mechs),
                    GSS_C_INITIATE,
                    ctypes.byref(store),
                    ctypes.byref(cred),
                    None,
                    ctypes.byref(lifetime),
                )
                del keep
            if gss_error(major):
                text = status_text(major, minor.value)
                hint = ""
                routine = major & _GSS_ERROR_MASK
                if self.keytab is None and routine == GSS_S_CREDENTIALS_EXPIRED:
                    hint = "; the tickets have expired: run kinit again"
                elif self.keytab is not None and routine == GSS_S_NO_CRED and self.principal:
                    hint = f"; does keytab {self.keytab} hold a key of {self.principal}?"
                msg = f"Kerberos: cannot acquire credentials for {self.describe()}: {text}{hint}"
                raise KerberosError(msg, major=major, minor=minor.value)
            if lifetime.value == 0 and self.keytab is None:
                release_cred(cred)
                msg = f"Kerberos: the tickets of {self.describe()} have expired: run kinit again"
                raise KerberosError(msg, major=GSS_S_CREDENTIALS_EXPIRED, minor=0)
            return _Handle(cred, int(lifetime.value))
        finally:
            release_name(name)

    @contextmanager
    def lease(self) -> Iterator[ctypes.c_void_p]:
        """The GSS credential handle for the length of the ``with`` block: acquired on
        first use, acquired anew when due (see :class:`KerberosCredentials`); a refresh
        meanwhile does not release it under the caller.

        Raises:
            KerberosError: the credential cannot be acquired.
        """
        with self._lock:
            if self._closed:
                msg = f"Kerberos credentials of {self.describe()} are closed"
                raise KerberosError(msg)
            current = self._current
            if current is not None and current.due(self.renewable_from_keytab):
                current.retired = True
                self._current = current = None
                self._drop_retired()
            if current is None:
                current = self._acquire()
                self._current = current
                self._held.append(current)
            current.users += 1
        try:
            yield current.cred
        finally:
            with self._lock:
                current.users -= 1
                self._drop_retired()

    def refresh(self, stale: ctypes.c_void_p | None = None) -> None:
        """Acquire the credential anew on next use (after the tickets expired). With
        ``stale`` given, only if that handle is still the current one (another thread
        may have refreshed already)."""
        with self._lock:
            current = self._current
            if current is None:
                return
            if stale is not None and current.cred.value != stale.value:
                return
            current.retired = True
            self._current = None
            self._drop_retired()

    def _drop_retired(self) -> None:
        # Under self._lock.
        for handle in [h for h in self._held if h.retired and h.users == 0]:
            self._held.remove(handle)
            release_cred(handle.cred)

    def acquire(self) -> None:
        """Acquire the credential now rather than on first use.

        Raises:
            KerberosError: naming the principal and keytab or cache, with the GSS text.
        """
        with self.lease():
            pass

    def lifetime(self) -> int | None:
        """Seconds the acquired credential (its TGT) remains valid, as
        ``gss_inquire_cred`` reports it (0 once expired); None before first use."""
        with self._lock:
            handle = self._current
            if handle is None:
                return None
            handle.users += 1
        try:
            minor = OM_uint32()
            lifetime = OM_uint32()
            major = gss_library().lib.gss_inquire_cred(
                ctypes.byref(minor), handle.cred, None, ctypes.byref(lifetime), None, None
            )
            if gss_error(major):
                return 0
            return int(lifetime.value)
        finally:
            with self._lock:
                handle.users -= 1
                self._drop_retired()

    def expires_at(self) -> float | None:
        """The UNIX time the acquired credential expires (see :meth:`lifetime`)."""
        left = self.lifetime()
        return None if left is None else time.time() + left

    def close(self) -> None:
        """Release the credential; later use raises. Idempotent."""
        with self._lock:
            self._closed = True
            if self._current is not None:
                self._current.retired = True
                self._current = None
            self._drop_retired()

    @staticmethod
    def _release_all(held: list[_Handle]) -> None:
        # weakref.finalize: the object is gone, so nobody holds a lease.
        for handle in held:
            release_cred(handle.cred)
        held.clear()

    def __enter__(self) -> KerberosCredentials:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# SASL GSSAPI (RFC 4752), initiator side
# ---------------------------------------------------------------------------


class SaslGssapiClient:
    """The client side of SASL ``GSSAPI`` (RFC 4752) for one connection, as Java's
    ``SaslClient`` runs it: no authorization id, security layer "none", maximum buffer 0.

    ``service@host`` is the acceptor's host-based name (``broker`` and ``localhost``:
    the principal ``broker/localhost@REALM``). One object per authentication, used by
    one thread; :meth:`close` (or the end of a ``with`` block) frees the GSS context
    early, and completion frees it too.

    Raises:
        KerberosError: from every step, naming the principal, keytab or cache and the
            service principal, with the GSS text.
    """

    def __init__(self, credentials: KerberosCredentials, service: str, host: str) -> None:
        if not service or not host or "@" in service or "@" in host:
            msg = f"Kerberos service {service!r} and host {host!r} must be non-empty, no '@'"
            raise KerberosError(msg)
        self.credentials = credentials
        self.service = service
        self.host = host
        gss = gss_library()
        self._target = import_name(f"{service}@{host}", gss.nt_hostbased_service)
        self._context = ctypes.c_void_p()
        self._stage = "new"  # new -> context -> layer -> complete (or failed)
        #: Seconds the established context is valid (the service ticket's lifetime).
        self.context_lifetime: int | None = None
        self._finalizer = weakref.finalize(
            self, SaslGssapiClient._free, self._context, self._target
        )
        self._finalizer.atexit = False  # as for KerberosCredentials

    @property
    def service_principal(self) -> str:
        """``service/host`` (the realm is the one krb5 maps ``host`` to)."""
        return f"{self.service}/{self.host}"

    @property
    def complete(self) -> bool:
        """Whether the exchange has finished successfully."""
        return self._stage == "complete"

    def _fail(
        self, what: str, major: int | None = None, minor: int = 0, detail: str | None = None
    ) -> KerberosError:
        """A :class:`KerberosError` for ``what`` (the context is deleted). ``detail``:
        the status text when already taken, else it is taken here; call it right after
        the failed GSS call (the detailed minor text is the thread's last krb5 error)."""
        if detail is None and major is not None:
            detail = status_text(major, minor)
        msg = (
            f"Kerberos: {what} for {self.credentials.describe()} to service principal "
            f"{self.service_principal} ({self.service}@{self.host})"
            + (f": {detail}" if detail else "")
        )
        self._stage = "failed"
        delete_context(self._context)
        return KerberosError(msg, major=major, minor=minor if major is not None else None)

    def _step(self, token: bytes | None) -> bytes:
        """One ``gss_init_sec_context`` call; on expired credentials at the first step,
        the credential is acquired anew and the step retried once."""
        gss = gss_library()
        fresh_context = not self._context.value
        for attempt in (1, 2):
            minor = OM_uint32()
            output = GssBuffer()
            ret_flags = OM_uint32()
            time_rec = OM_uint32()
            buffer, keep = input_buffer(token) if token is not None else (None, None)
            with ExitStack() as stack:
                try:
                    cred = stack.enter_context(self.credentials.lease())
                except KerberosError as exc:
                    self._stage = "failed"
                    delete_context(self._context)
                    msg = f"{exc} (authenticating to service principal {self.service_principal})"
                    raise KerberosError(msg, major=exc.major, minor=exc.minor) from exc
                major = gss.lib.gss_init_sec_context(
                    ctypes.byref(minor),
                    cred,
                    ctypes.byref(self._context),
                    self._target,
                    gss.mech_krb5,
                    GSS_C_MUTUAL_FLAG | GSS_C_SEQUENCE_FLAG,
                    0,
                    None,
                    ctypes.byref(buffer) if buffer is not None else None,
                    None,
                    ctypes.byref(output),
                    ctypes.byref(ret_flags),
                    ctypes.byref(time_rec),
                )
                data = take_buffer(output)
                del keep
                if not gss_error(major):
                    if major & GSS_S_CONTINUE_NEEDED:
                        self._stage = "context"
                    else:
                        self.context_lifetime = int(time_rec.value)
                        self._stage = "layer"
                    return data
                detail = status_text(major, minor.value)
                expired = (
                    major & _GSS_ERROR_MASK == GSS_S_CREDENTIALS_EXPIRED
                    or "Ticket expired" in detail
                )
                if attempt == 1 and fresh_context and expired:
                    # Stale tickets (the TGT expired early, or a cache was renewed
                    # outside): acquire the credential again and start over.
                    delete_context(self._context)
                    self.credentials.refresh(cred)
                    continue
            if expired and not self.credentials.renewable_from_keytab:
                detail += "; the tickets have expired: run kinit again"
            msg = "authentication failed"
            raise self._fail(msg, major, minor.value, detail)
        raise AssertionError  # unreachable: the loop returns or raises

    def initial_response(self) -> bytes:
        """The first token (the Kerberos AP-REQ), to send with the SASL start."""
        if self._stage != "new":
            msg = f"initial_response() called twice (stage {self._stage})"
            raise KerberosError(msg)
        return self._step(None)

    def evaluate_challenge(self, challenge: bytes) -> bytes:
        """The response to a server challenge."""
        if self._stage == "context":
            return self._step(challenge)
        if self._stage == "layer":
            return self._security_layer(challenge)
        if self._stage == "new" and not challenge:
            return self.initial_response()
        if self._stage == "new":
            msg = "Kerberos: a non-empty SASL challenge before the initial response"
        else:
            msg = f"Kerberos: a SASL challenge after the exchange {self._stage}"
        raise KerberosError(msg)

    def _security_layer(self, challenge: bytes) -> bytes:
        if not challenge:
            # A server that sends an empty challenge once the context is established
            # (no mutual authentication token): answer empty, the offer comes next.
            return b""
        gss = gss_library()
        minor = OM_uint32()
        token, keep = input_buffer(challenge)
        output = GssBuffer()
        conf = ctypes.c_int()
        qop = OM_uint32()
        major = gss.lib.gss_unwrap(
            ctypes.byref(minor),
            self._context,
            ctypes.byref(token),
            ctypes.byref(output),
            ctypes.byref(conf),
            ctypes.byref(qop),
        )
        del keep
        if gss_error(major):
            msg = "cannot unwrap the security-layer offer"
            raise self._fail(msg, major, minor.value)
        offer = take_buffer(output)
        if len(offer) != 4:
            msg = f"the security-layer offer has {len(offer)} bytes, not 4"
            raise self._fail(msg)
        if not offer[0] & SASL_LAYER_NONE:
            msg = (
                f"the server offers security layers 0x{offer[0]:02x} without 'none' (0x01), "
                "the only one this client supports"
            )
            raise self._fail(msg)
        # Layer "none", maximum buffer 0, no authorization id.
        answer, keep = input_buffer(bytes((SASL_LAYER_NONE, 0, 0, 0)))
        wrapped = GssBuffer()
        major = gss.lib.gss_wrap(
            ctypes.byref(minor),
            self._context,
            0,
            0,
            ctypes.byref(answer),
            None,
            ctypes.byref(wrapped),
        )
        del keep
        if gss_error(major):
            msg = "cannot wrap the security-layer choice"
            raise self._fail(msg, major, minor.value)
        data = take_buffer(wrapped)
        self._stage = "complete"
        delete_context(self._context)
        return data

    def close(self) -> None:
        """Free the GSS context (and the target name). Idempotent."""
        if self._stage not in ("complete", "failed"):
            self._stage = "failed"
        self._finalizer()

    @staticmethod
    def _free(context: ctypes.c_void_p, target: ctypes.c_void_p) -> None:
        delete_context(context)
        release_name(target)

    def __enter__(self) -> SaslGssapiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
