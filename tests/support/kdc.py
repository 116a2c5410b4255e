"""A real MIT Kerberos KDC for the Kerberos tests, and a SASL GSSAPI acceptor to test against.

:class:`Kdc` creates the realm :data:`REALM` in a directory (database, stash file,
``kdc.conf``), starts ``krb5kdc -n`` on a free loopback port (TCP and UDP), writes the
client ``krb5.conf`` (:attr:`Kdc.krb5_conf`, :meth:`Kdc.env`, :meth:`Kdc.jvm_flags`) and
manages principals and keytabs through ``kadmin.local``. It is a context manager and has
a plain :meth:`Kdc.start` / :meth:`Kdc.stop` API, so fixtures of any scope can use it.

The binaries (``krb5kdc``, ``kdb5_util``, ``kadmin.local``, ``kinit``, ``klist``,
:func:`krb5_tools`) come from the PATH (plus the sbin directories) when all are there.
Otherwise Debian's packages are fetched without root and without installing anything:
``apt-get download`` of :data:`KRB5_PACKAGES` (pinned to one krb5 version, so that all
krb5 libraries match) and :data:`OTHER_PACKAGES` into
``<cache_dir()>/krb5-<version>/debs``, each ``dpkg-deb -x``-ed into ``.../root``, and the
binaries run with ``LD_LIBRARY_PATH`` on the extracted libraries. A lock file in the cache
directory keeps concurrent test processes from preparing it twice. Debian's libkdb5
finds the database module (``db2.so``) in a compiled-in directory or ``[dbmodules]
db_module_dir`` of ``kdc.conf``; ``plugin_base_dir`` of ``[libdefaults]`` does *not*
move it (it moves the other plugins, e.g. ``preauth/``), so the extracted case sets both.

Measured on a Debian 12 VM: the first run prepares the packages in about 1.4 s
(``apt-cache policy``, ``apt-get download`` of 1.2 MB, extraction to 5.3 MB); later runs
take them from the cache and :meth:`Kdc.start` (realm creation and KDC start) takes about
0.03-0.05 s.

:class:`SaslGssapiServer` is the acceptor side of SASL GSSAPI (RFC 4752) over
``gss_accept_sec_context``, built on the public ctypes layer of
:mod:`pulsar_spark.client.gssapi` (no second set of prototypes).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from pulsar_spark.client import gssapi

from .apache_dist import cache_dir
from .net import free_port, poll_until

__all__ = [
    "KRB5_PACKAGES",
    "OTHER_PACKAGES",
    "REALM",
    "Kdc",
    "KdcError",
    "Krb5Tools",
    "SaslGssapiServer",
    "ensure_packages",
    "krb5_tools",
    "sasl_exchange",
]

#: The realm every :class:`Kdc` serves.
REALM = "PULSAR.TEST"

#: Debian packages built from the krb5 source: downloaded at one version.
KRB5_PACKAGES = (
    "krb5-kdc",
    "krb5-admin-server",
    "krb5-user",
    "libkadm5srv-mit12",
    "libkadm5clnt-mit12",
    "libkdb5-10",
    "libgssrpc4",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libgssapi-krb5-2",
)
#: The KDC's event loop libraries (their own versions).
OTHER_PACKAGES = ("libverto1", "libverto-libev1", "libev4")

#: The tools a :class:`Kdc` runs: name -> directory in an extracted package tree.
TOOLS = {
    "krb5kdc": "usr/sbin",
    "kdb5_util": "usr/sbin",
    "kadmin.local": "usr/sbin",
    "kinit": "usr/bin",
    "klist": "usr/bin",
}

_SYSTEM_PATH_EXTRA = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class KdcError(RuntimeError):
    """The KDC or its tools could not be obtained, started or used."""


# ---------------------------------------------------------------------------
# The binaries
# ---------------------------------------------------------------------------


class Krb5Tools:
    """Where the Kerberos tools are and what they need to run."""

    def __init__(
        self, paths: Mapping[str, Path], root: Path | None, source: str, lib_dir: Path | None
    ) -> None:
        self.paths = dict(paths)
        #: The extracted package tree (None: system binaries).
        self.root = root
        #: For ``LD_LIBRARY_PATH`` (None: system binaries).
        self.lib_dir = lib_dir
        #: Where they come from, for messages and reports.
        self.source = source

    @property
    def plugin_dir(self) -> Path | None:
        """The extracted ``krb5/plugins`` (None: the system's compiled-in one)."""
        return None if self.lib_dir is None else self.lib_dir / "krb5" / "plugins"

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: ``os.environ``) with ``LD_LIBRARY_PATH`` for extracted tools."""
        env = dict(os.environ if base is None else base)
        if self.lib_dir is not None:
            old = env.get("LD_LIBRARY_PATH")
            env["LD_LIBRARY_PATH"] = f"{self.lib_dir}:{old}" if old else str(self.lib_dir)
        env["LC_ALL"] = "C"
        return env


_TOOLS: Krb5Tools | None = None


def krb5_tools() -> Krb5Tools:
    """The tools from the PATH (and sbin directories) if all are there, else from
    Debian's packages (:func:`ensure_packages`). Cached per process.

    Raises:
        KdcError: the packages cannot be fetched (the message says why and what to do).
    """
    global _TOOLS
    if _TOOLS is not None:
        return _TOOLS
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SYSTEM_PATH_EXTRA])
    found = {name: shutil.which(name, path=search) for name in TOOLS}
    if all(found.values()):
        paths = {name: Path(str(p)) for name, p in found.items()}
        _TOOLS = Krb5Tools(paths, None, "the PATH", None)
        return _TOOLS
    root = ensure_packages()
    lib_dirs = sorted(root.glob("usr/lib/*-linux-gnu"))
    if not lib_dirs:
        msg = f"{root} has no usr/lib/<triplet>-linux-gnu: not an extracted krb5 tree"
        raise KdcError(msg)
    paths = {name: root / sub / name for name, sub in TOOLS.items()}
    _TOOLS = Krb5Tools(paths, root, f"Debian packages in {root.parent}", lib_dirs[0])
    return _TOOLS


def _run(
    command: list[str],
    *,
    timeout: float = 60.0,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"{command[0]} failed: {exc}"
        raise KdcError(msg) from exc
    if done.returncode != 0:
        output = (done.stderr or done.stdout)[-2000:]
        msg = f"{' '.join(command)} exited {done.returncode}: {output}"
        raise KdcError(msg)
    return done.stdout


def _candidate_version(package: str) -> str:
    out = _run(["apt-cache", "policy", package], env={**os.environ, "LC_ALL": "C"})
    m = re.search(r"Candidate:\s*(\S+)", out)
    if not m or m.group(1) == "(none)":
        root_hint = (
            "run `apt-get update` (as root) first"
            if os.geteuid() != 0
            else "`apt-get update` did not help"
        )
        msg = (
            f"apt has no candidate version of {package}: the apt package lists are empty or "
            f"lack it ({root_hint}), or install krb5-kdc, krb5-admin-server and krb5-user"
        )
        raise KdcError(msg)
    return m.group(1)


def ensure_packages() -> Path:
    """The extracted Debian krb5 tree (``.../krb5-<version>/root``), fetched if needed.

    Safe against concurrent test processes (a lock file in :func:`cache_dir`) and
    interrupted runs (a marker file written last).

    Raises:
        KdcError: no apt, empty apt lists (``apt-get update`` needs root: it is run only
            when running as root), a failed download or extraction.
    """
    cache = cache_dir()
    done = sorted(cache.glob("krb5-*/.pulsar-spark-complete"))
    if done:
        return done[-1].parent / "root"
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        msg = (
            "no krb5kdc/kdb5_util/kadmin.local/kinit/klist on the PATH and no apt-get and "
            "dpkg-deb to fetch Debian's packages: install MIT Kerberos' KDC and clients"
        )
        raise KdcError(msg)
    with (cache / ".krb5.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = sorted(cache.glob("krb5-*/.pulsar-spark-complete"))
        if done:
            return done[-1].parent / "root"
        try:
            version = _candidate_version("krb5-kdc")
        except KdcError:
            if os.geteuid() != 0:
                raise
            _run(["apt-get", "update"], timeout=300)
            version = _candidate_version("krb5-kdc")
        home = cache / f"krb5-{version}"
        debs = home / "debs"
        shutil.rmtree(home, ignore_errors=True)
        debs.mkdir(parents=True)
        wanted = [f"{p}={version}" for p in KRB5_PACKAGES] + list(OTHER_PACKAGES)
        try:
            _run(["apt-get", "download", *wanted], cwd=debs, timeout=300)
        except KdcError as exc:
            msg = (
                f"apt-get download of the krb5 {version} packages failed (are the apt "
                f"package lists empty? `apt-get update` needs root): {exc}"
            )
            raise KdcError(msg) from exc
        staging = home / f".root-{os.getpid()}"
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(staging)])
        missing = [n for n, sub in TOOLS.items() if not (staging / sub / n).exists()]
        if missing:
            msg = f"the krb5 {version} packages in {debs} lack {missing}"
            raise KdcError(msg)
        staging.replace(home / "root")
        (home / ".pulsar-spark-complete").write_text(
            "\n".join(p.name for p in sorted(debs.glob("*.deb"))) + "\n"
        )
        return home / "root"


# ---------------------------------------------------------------------------
# The KDC
# ---------------------------------------------------------------------------


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_BENIGN = re.compile(
    r"^(No policy specified for |Authenticating as principal |NOTICE: |Password for )"
)


class Kdc:
    """An MIT Kerberos KDC serving :data:`REALM` from ``directory``.

    Use ``with Kdc(dir) as kdc:`` or :meth:`start` / :meth:`stop`. ``max_life`` is the
    realm's ``max_life`` (a krb5 duration: ``"10h"``, ``"60s"``).
    """

    def __init__(self, directory: Path, *, realm: str = REALM, max_life: str = "10h") -> None:
        self.directory = Path(directory)
        self.realm = realm
        self.max_life = max_life
        self.port: int | None = None
        self.log = self.directory / "kdc.log"
        #: The client configuration (the KDC's address, the realm, no DNS).
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        #: Extra ``[libdefaults]`` of the tools (``plugin_base_dir`` of extracted ones).
        self.tools_conf = self.directory / "tools.conf"
        self.rcache_dir = self.directory / "rcache"
        #: Seconds :meth:`start` took (realm creation and KDC start), and the tools' source.
        self.start_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._tools: Krb5Tools | None = None

    # -- lifecycle --------------------------------------------------------------------

    @property
    def tools(self) -> Krb5Tools:
        if self._tools is None:
            self._tools = krb5_tools()
        return self._tools

    def start(self) -> Kdc:
        """Create the realm and start the KDC; returns once it accepts connections.

        Raises:
            KdcError: with the tail of the KDC's log.
        """
        began = time.monotonic()
        tools = self.tools
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rcache_dir.mkdir(exist_ok=True)
        (self.directory / "kadm5.acl").write_text("")
        for attempt in range(3):
            self.port = free_port()
            self._write_configs()
            if not (self.directory / "principal").exists():
                password = secrets.token_urlsafe(24)
                self._tool(
                    ["kdb5_util", "create", "-s", "-r", self.realm, "-P", password],
                    kdc=True,
                    what=f"kdb5_util create -s -r {self.realm} -P ***",
                )
            with (self.directory / "krb5kdc.out").open("ab") as out:
                self._process = subprocess.Popen(
                    [str(tools.paths["krb5kdc"]), "-n", "-r", self.realm],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self._env(kdc=True),
                    cwd=self.directory,
                )
            started = poll_until(lambda: self._answers() or self._process_exited(), 15.0, 0.02)
            if started and not self._process_exited():
                break
            failure = _tail(self.log) + "\n" + _tail(self.directory / "krb5kdc.out")
            self._kill()
            if "Address already in use" not in failure or attempt == 2:
                msg = f"krb5kdc did not start on 127.0.0.1:{self.port}:\n{failure}"
                raise KdcError(msg)
        self.start_seconds = time.monotonic() - began
        return self

    def _process_exited(self) -> bool:
        return self._process is None or self._process.poll() is not None

    def _answers(self) -> bool:
        assert self.port is not None
        if "commencing operation" not in _tail(self.log, 5):
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def stop(self) -> None:
        """Stop the KDC (the realm's files stay). Idempotent."""
        self._kill()

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- configuration ---------------------------------------------------------------

    def _write_configs(self) -> None:
        d = self.directory
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n"
            "  dns_lookup_realm = false\n"
            "  rdns = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  udp_preference_limit = 1\n"
            "  forwardable = false\n"
            "\n[realms]\n"
            f"  {self.realm} = {{\n"
            f"    kdc = 127.0.0.1:{self.port}\n"
            "  }\n"
            "\n[domain_realm]\n"
            f"  localhost = {self.realm}\n"
            f"  127.0.0.1 = {self.realm}\n"
            f"  .localhost = {self.realm}\n"
        )
        plugins = self.tools.plugin_dir
        self.tools_conf.write_text(
            f"[libdefaults]\n  plugin_base_dir = {plugins}\n" if plugins else ""
        )
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n"
            f"  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "\n[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {d / 'principal'}\n"
            f"    key_stash_file = {d / 'stash'}\n"
            f"    acl_file = {d / 'kadm5.acl'}\n"
            f"    max_life = {self.max_life}\n"
            "    max_renewable_life = 7d\n"
            "    default_principal_flags = +preauth\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "\n[logging]\n"
            f"  kdc = FILE:{self.log}\n"
            f"  admin_server = FILE:{self.log}\n"
            f"  default = FILE:{self.log}\n"
            # SPAKE needs groups configured; the KDC logs an error at start without them.
            "\n[plugins]\n"
            "  kdcpreauth = {\n    disable = spake\n  }\n"
            + (
                f"\n[dbmodules]\n  db_module_dir = {plugins / 'kdb'}\n"
                if plugins is not None
                else ""
            )
        )

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The variables a client process needs: ``KRB5_CONFIG`` (:attr:`krb5_conf`) and
        ``KRB5RCACHEDIR`` (acceptors' replay caches inside the directory). Merged into
        ``base`` when given."""
        env = dict(base or {})
        env["KRB5_CONFIG"] = str(self.krb5_conf)
        env["KRB5RCACHEDIR"] = str(self.rcache_dir)
        return env

    def jvm_flags(self) -> list[str]:
        """The flags a child JVM needs: ``-Djava.security.krb5.conf=<krb5.conf>``."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def _env(self, *, kdc: bool = False, ccache: str | None = None) -> dict[str, str]:
        env = self.tools.env()
        env["KRB5_CONFIG"] = f"{self.tools_conf}:{self.krb5_conf}"
        env["KRB5RCACHEDIR"] = str(self.rcache_dir)
        if kdc:
            env["KRB5_KDC_PROFILE"] = str(self.kdc_conf)
        else:
            env.pop("KRB5_KDC_PROFILE", None)
        if ccache is not None:
            env["KRB5CCNAME"] = ccache
        return env

    def _tool(
        self,
        command: list[str],
        *,
        kdc: bool = False,
        ccache: str | None = None,
        stdin: str = "",
        what: str | None = None,
    ) -> str:
        """Run a tool; ``what`` describes it in errors (default: the command line)."""
        exe = str(self.tools.paths[command[0]])
        what = what or " ".join(command)
        try:
            done = subprocess.run(
                [exe, *command[1:]],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env=self._env(kdc=kdc, ccache=ccache),
                cwd=self.directory,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            msg = f"{what}: {exc}\nKDC log:\n{_tail(self.log)}"
            raise KdcError(msg) from exc
        # kadmin.local exits 0 after a failed request: its errors are its stderr lines.
        errors = [
            line for line in done.stderr.splitlines() if line.strip() and not _BENIGN.match(line)
        ]
        if done.returncode != 0 or errors:
            msg = (
                f"{what} failed (exit status {done.returncode}): "
                f"{' / '.join(errors) or done.stdout[-500:]}\nKDC log:\n{_tail(self.log)}"
            )
            raise KdcError(msg)
        return done.stdout

    def _kadmin(self, *requests: str, what: str | None = None) -> str:
        # Requests on stdin, so no password shows on a command line.
        return self._tool(
            ["kadmin.local", "-r", self.realm],
            kdc=True,
            stdin="\n".join(requests) + "\n",
            what=f"kadmin.local: {what or ' / '.join(requests)}",
        )

    # -- principals --------------------------------------------------------------------

    def principal(self, name: str) -> str:
        """``name`` with the realm (``client`` -> ``client@PULSAR.TEST``)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(
        self, name: str, *, keytab: Path | None = None, max_life: str | None = None
    ) -> Path:
        """Create ``name`` with a random key and export it to ``keytab`` (default
        ``<directory>/<name>.keytab``, ``/`` as ``_``); returns the keytab's path."""
        path = Path(keytab) if keytab is not None else self._default_keytab(name)
        life = f' -maxlife "{max_life}"' if max_life is not None else ""
        self._kadmin(f"addprinc -randkey{life} {name}", f"ktadd -k {path} {name}")
        return path

    def add_password_principal(self, name: str, password: str) -> None:
        """Create ``name`` with ``password`` (given to ``kadmin.local`` on stdin)."""
        if any(c in password for c in '\n\r"'):
            msg = "a test password must not hold quotes or line breaks"
            raise ValueError(msg)
        self._kadmin(f'addprinc -pw "{password}" {name}', what=f"addprinc -pw *** {name}")

    def rotate_key(self, name: str, keytab: Path | None = None) -> Path | None:
        """Give ``name`` a new random key (a new key version): keytabs exported before
        hold the old key and no longer authenticate. With ``keytab`` (best a new file),
        the new key is exported there and its path returned."""
        requests = [f"cpw -randkey {name}"]
        if keytab is not None:
            requests.append(f"ktadd -k {keytab} -norandkey {name}")
        self._kadmin(*requests)
        return keytab

    def set_max_life(self, name: str, seconds: float) -> None:
        """The principal's maximum ticket life. On ``krbtgt/REALM@REALM`` it caps every
        TGT; a ticket lives min(client, service, krbtgt, realm ``max_life``)."""
        self._kadmin(f'modprinc -maxlife "{int(seconds)} seconds" {name}')

    def tgts_issued(self, name: str) -> list[int]:
        """The ``authtime`` (UNIX seconds) of every ticket-granting ticket this KDC issued
        ``name``, from its log (one per login from a keytab or password)."""
        pattern = re.compile(
            r"AS_REQ .*ISSUE: authtime (\d+), .*\b"
            + re.escape(self.principal(name))
            + r" for krbtgt/"
        )
        return [int(m.group(1)) for m in pattern.finditer(self.log.read_text())]

    def krbtgt(self) -> str:
        """The realm's ticket-granting principal, ``krbtgt/PULSAR.TEST@PULSAR.TEST``."""
        return f"krbtgt/{self.realm}@{self.realm}"

    def _default_keytab(self, name: str) -> Path:
        return self.directory / (name.split("@")[0].replace("/", "_") + ".keytab")

    # -- client tools --------------------------------------------------------------------

    def kinit(
        self,
        principal: str,
        *,
        ccache: str,
        keytab: Path | None = None,
        password: str | None = None,
    ) -> None:
        """``kinit`` into ``ccache`` (``FILE:/...``): ``-k -t keytab``, or with
        ``password`` (given on stdin)."""
        if (keytab is None) == (password is None):
            msg = "kinit takes a keytab or a password"
            raise ValueError(msg)
        if keytab is not None:
            self._tool(["kinit", "-k", "-t", str(keytab), principal], ccache=ccache)
        else:
            self._tool(["kinit", principal], ccache=ccache, stdin=f"{password}\n")

    def klist(self, ccache: str) -> str:
        """``klist`` of ``ccache`` (C locale)."""
        return self._tool(["klist", "-c", ccache])

    def ticket_times(self, ccache: str, service: str | None = None) -> tuple[float, float]:
        """Start and end (UNIX times) of the TGT in ``ccache`` as ``klist`` shows them, or
        of the ticket for ``service`` (``broker/localhost@PULSAR.TEST``)."""
        target = service or self.krbtgt()
        for line in self.klist(ccache).splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[4] == target:
                start = datetime.strptime(" ".join(parts[0:2]), "%m/%d/%y %H:%M:%S")
                end = datetime.strptime(" ".join(parts[2:4]), "%m/%d/%y %H:%M:%S")
                return start.timestamp(), end.timestamp()
        msg = f"no ticket for {target} in {ccache}"
        raise KdcError(msg)


# ---------------------------------------------------------------------------
# The acceptor (tests only)
# ---------------------------------------------------------------------------


class SaslGssapiServer:
    """The server side of SASL GSSAPI (RFC 4752) as Java's ``SaslServer`` runs it:
    accept the context (answer its tokens), then offer the security layers
    ``offered_layers`` (default: "none" only) with maximum buffer 0 and check the
    client's choice. :attr:`client_principal` is the authenticated name;
    :attr:`authorization_id` what the client asked to act as (empty: itself).

    ``keytab`` holds the service's key; ``rcache_dir`` takes the replay cache.
    """

    def __init__(
        self, keytab: Path, *, rcache_dir: Path | None = None, offered_layers: int = 1
    ) -> None:
        gss = gssapi.gss_library()
        self.offered_layers = offered_layers
        self.client_principal: str | None = None
        self.authorization_id: str | None = None
        self.complete = False
        self._stage = "context"
        self._context = ctypes.c_void_p()
        self._cred = ctypes.c_void_p()
        entries = {"keytab": str(keytab)}
        if rcache_dir is not None:
            entries["rcache"] = f"file2:{rcache_dir / 'acceptor.rcache2'}"
        store, keep = gssapi.credential_store(entries)
        minor = gssapi.OM_uint32()
        mechs = gssapi.krb5_mechs()
        major = gss.lib.gss_acquire_cred_from(
            ctypes.byref(minor),
            None,
            0,
            ctypes.byref(mechs),
            gssapi.GSS_C_ACCEPT,
            ctypes.byref(store),
            ctypes.byref(self._cred),
            None,
            None,
        )
        del keep
        if gssapi.gss_error(major):
            msg = f"acceptor keytab {keytab}: {gssapi.status_text(major, minor.value)}"
            raise gssapi.KerberosError(msg, major=major, minor=minor.value)

    def evaluate_response(self, response: bytes) -> bytes:
        """The challenge answering the client's ``response``."""
        if self._stage == "context":
            return self._accept(response)
        if self._stage == "offer":
            # The client's (empty) answer to the last context token: offer the layers.
            self._stage = "choice"
            return self._wrap(bytes((self.offered_layers, 0, 0, 0)))
        if self._stage == "choice":
            choice = self._unwrap(response)
            if len(choice) < 4 or not choice[0] & self.offered_layers or choice[0] not in (1, 2, 4):
                msg = f"the client chose security layer {choice[:1].hex()}, not one offered"
                raise gssapi.KerberosError(msg)
            self.authorization_id = choice[4:].decode("utf-8")
            self.complete = True
            self._stage = "complete"
            return b""
        msg = f"a SASL response after the exchange is {self._stage}"
        raise gssapi.KerberosError(msg)

    def _accept(self, token: bytes) -> bytes:
        gss = gssapi.gss_library()
        minor = gssapi.OM_uint32()
        source = ctypes.c_void_p()
        output = gssapi.GssBuffer()
        buffer, keep = gssapi.input_buffer(token)
        major = gss.lib.gss_accept_sec_context(
            ctypes.byref(minor),
            ctypes.byref(self._context),
            self._cred,
            ctypes.byref(buffer),
            None,
            ctypes.byref(source),
            None,
            ctypes.byref(output),
            None,
            None,
            None,
        )
        del keep
        data = gssapi.take_buffer(output)
        if gssapi.gss_error(major):
            gssapi.release_name(source)
            msg = f"acceptor: {gssapi.status_text(major, minor.value)}"
            raise gssapi.KerberosError(msg, major=major, minor=minor.value)
        if not major & gssapi.GSS_S_CONTINUE_NEEDED:
            self.client_principal = gssapi.display_name(source)
            self._stage = "offer"
            if not data:  # no mutual-authentication token: offer right away
                gssapi.release_name(source)
                self._stage = "choice"
                return self._wrap(bytes((self.offered_layers, 0, 0, 0)))
        gssapi.release_name(source)
        return data

    def _wrap(self, data: bytes) -> bytes:
        gss = gssapi.gss_library()
        minor = gssapi.OM_uint32()
        buffer, keep = gssapi.input_buffer(data)
        output = gssapi.GssBuffer()
        major = gss.lib.gss_wrap(
            ctypes.byref(minor),
            self._context,
            0,
            0,
            ctypes.byref(buffer),
            None,
            ctypes.byref(output),
        )
        del keep
        if gssapi.gss_error(major):
            msg = f"acceptor wrap: {gssapi.status_text(major, minor.value)}"
            raise gssapi.KerberosError(msg, major=major, minor=minor.value)
        return gssapi.take_buffer(output)

    def _unwrap(self, data: bytes) -> bytes:
        gss = gssapi.gss_library()
        minor = gssapi.OM_uint32()
        buffer, keep = gssapi.input_buffer(data)
        output = gssapi.GssBuffer()
        major = gss.lib.gss_unwrap(
            ctypes.byref(minor),
            self._context,
            ctypes.byref(buffer),
            ctypes.byref(output),
            None,
            None,
        )
        del keep
        if gssapi.gss_error(major):
            msg = f"acceptor unwrap: {gssapi.status_text(major, minor.value)}"
            raise gssapi.KerberosError(msg, major=major, minor=minor.value)
        return gssapi.take_buffer(output)

    def close(self) -> None:
        """Free the context and the acceptor credential. Idempotent."""
        gssapi.delete_context(self._context)
        gssapi.release_cred(self._cred)

    def __enter__(self) -> SaslGssapiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sasl_exchange(client: gssapi.SaslGssapiClient, server: SaslGssapiServer) -> int:
    """Run a SASL GSSAPI exchange between ``client`` and ``server`` in memory, as a broker
    connection would carry it; returns the number of round trips.

    Raises:
        KerberosError: from either side.
    """
    response = client.initial_response()
    rounds = 0
    while not (client.complete and server.complete):
        rounds += 1
        if rounds > 10:
            msg = "the SASL GSSAPI exchange did not finish in 10 rounds"
            raise gssapi.KerberosError(msg)
        challenge = server.evaluate_response(response)
        if server.complete:
            break
        response = client.evaluate_challenge(challenge)
    return rounds
