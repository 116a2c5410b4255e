"""The pytest plugin of the test brokers: their fixtures, one factory, one report hook, figures.

``tests/conftest.py`` loads it (``pytest_plugins``). Every broker process a fixture starts
is killed at teardown, whatever happened (and, through ``setpriv --pdeathsig``, when the
test process dies). Failing to start is an error, never a skip: ``start`` raises
:class:`tests.support.process.BrokerStartError` carrying the tail of the broker log.

Fixtures
--------
``pulsar_lite`` (session)
    A :class:`PulsarLite` with ``default_partitions = 0``: every topic is non-partitioned.
``pulsar_lite_partitioned`` (session)
    A :class:`PulsarLite` with ``default_partitions = 4``. pulsar-lite treats *every* topic
    name as partitioned on such an instance, ``-partition-K`` names included (brokers.md,
    quirk 3), so partitioned tests get their own instance.
``apache_pulsar``, ``apache_pulsar_secure``, ``apache_pulsar_dedup``, ``apache_pulsar_stock``,
``apache_pulsar_txn``
(session, started on first use)
    An :class:`ApachePulsar` of each variant (plain; TLS + tokens, ``.secure`` holding the
    certificates and tokens; deduplication + broker entry metadata; Apache Pulsar 4.0's
    stock data-lifecycle policies on a fast clock, which trim closed ledgers no durable
    subscription needs and delete inactive topics within seconds; transactions on).
``apache_line`` (module, parametrized ``2.10`` / ``3.3`` / ``4.0`` / ``4.2``)
    An :class:`ApachePulsar` of each Pulsar line users run (``LINES``: 2.10.1, 3.3.6,
    4.0.8, 4.2.4), the ``line`` variant (transactions, token authentication beside
    anonymous access, a namespace with the stock retention), for the conformance set
    (``tests/lines``). pytest groups a module's tests by the fixture's parameter and stops
    one line's broker before it starts the next: at most one of them runs at a time.
``fresh_pulsar_lite``, ``fresh_apache_pulsar`` (function)
    A :class:`BrokerFactory`, ``fresh_pulsar_lite(*, start=True, **config)`` and
    ``fresh_apache_pulsar(*, variant="plain", start=True, **options)``, for tests that stop,
    restart or kill a broker. Session instances refuse ``stop``/``kill``/``restart``.
``broker`` (function, parametrized ``lite`` / ``apache``)
    A :class:`BrokerHandle` with ``kind``, ``service_url``, ``http_url`` (None for
    pulsar-lite, which has no admin API) and ``admin``, for tests meant to run on both.
``topic_name`` (function)
    ``persistent://public/default/<test name>-<8 hex digits>``, unique per test.
``fault_proxy`` (function)
    A :class:`ProxyFactory`, ``fault_proxy(target, drop_every_frames=None, **options) ->
    FaultProxy``.

When a test fails, the log of each broker it used (the part written during the test, or
all of it for a broker the test started itself) is attached to the report as a section,
with the stats of each fault proxy it used; the whole log stays in the instance's
directory under pytest's basetemp, whose path the section names. At the end of the run the
figures of the Apache brokers (start and stop times, memory) are printed, then the
reliability figures (:func:`~.figures.figure`) and what the reliability tests took of the
run's test time (:func:`~.figures.time_share`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import pytest

from .apache import BROKER_KINDS, LINES, ApachePulsar, BrokerHandle
from .fault_proxy import FaultProxy
from .figures import time_share
from .lite import PulsarLite
from .process import BrokerProcess

__all__ = ["BrokerFactory", "ProxyFactory"]

_B = TypeVar("_B", bound=BrokerProcess)

#: Figures of every broker that started and says so (``summarize_figures``), by directory.
_FIGURES: dict[str, str] = {}


def _close(broker: BrokerProcess) -> None:
    """Teardown of any broker a fixture made: note its figures, kill it."""
    if broker.summarize_figures and broker.start_seconds:
        _FIGURES[str(broker.root)] = broker.figures()
    broker.close()


class BrokerFactory(Generic[_B]):
    """What ``fresh_pulsar_lite`` and ``fresh_apache_pulsar`` yield: brokers of a test's own.

    ``factory(*, start=True, **options)`` makes a broker with ``build(root, **options)``
    in a new directory (``name`` defaults to ``default_name(n, options)``, ``n`` counting
    from 0), started unless told not; teardown closes every one.
    """

    def __init__(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        prefix: str,
        build: Callable[..., _B],
        default_name: Callable[[int, Mapping[str, Any]], str],
    ) -> None:
        self._tmp = tmp_path_factory
        self._prefix = prefix
        self._build = build
        self._default_name = default_name
        self.instances: list[_B] = []

    def __call__(self, *, start: bool = True, **options: Any) -> _B:
        """A new broker (``options`` as its constructor's), started unless told not."""
        n = len(self.instances)
        root = self._tmp.mktemp(f"{self._prefix}-{n}", numbered=True)
        options.setdefault("name", self._default_name(n, options))
        broker = self._build(root, **options)
        self.instances.append(broker)
        if start:
            broker.start()
        return broker

    def close(self) -> None:
        for broker in self.instances:
            _close(broker)


class ProxyFactory:
    """What ``fault_proxy`` yields: ``fault_proxy(target, drop_every_frames=None, **kw)``."""

    def __init__(self) -> None:
        self.instances: list[FaultProxy] = []

    def __call__(
        self,
        target: str | PulsarLite,
        drop_every_frames: int | None = None,
        **options: Any,
    ) -> FaultProxy:
        proxy = FaultProxy(target, drop_every_frames=drop_every_frames, **options)
        self.instances.append(proxy)
        return proxy.start()

    def close(self) -> None:
        for proxy in self.instances:
            proxy.close()


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


def _session_broker(
    tmp_path_factory: pytest.TempPathFactory, build: Callable[..., _B], name: str, **options: Any
) -> Iterator[_B]:
    broker = build(tmp_path_factory.mktemp(name), name=name, shared=True, **options)
    try:
        broker.start()
        yield broker
    finally:
        _close(broker)


def _fresh(
    tmp_path_factory: pytest.TempPathFactory,
    prefix: str,
    build: Callable[..., _B],
    default_name: Callable[[int, Mapping[str, Any]], str],
) -> Iterator[BrokerFactory[_B]]:
    factory = BrokerFactory(tmp_path_factory, prefix, build, default_name)
    try:
        yield factory
    finally:
        factory.close()


def _node_slug(request: pytest.FixtureRequest, limit: int = 60) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    return slug[:limit].rstrip("-") or "test"


@pytest.fixture(scope="session")
def pulsar_lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLite]:
    """A session-wide pulsar-lite with ``default_partitions = 0``."""
    yield from _session_broker(tmp_path_factory, PulsarLite, "pulsar_lite", default_partitions=0)


@pytest.fixture(scope="session")
def pulsar_lite_partitioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLite]:
    """A session-wide pulsar-lite with ``default_partitions = 4`` (every topic has 4)."""
    yield from _session_broker(
        tmp_path_factory, PulsarLite, "pulsar_lite_partitioned", default_partitions=4
    )


@pytest.fixture(scope="session")
def apache_pulsar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide plain Apache Pulsar standalone."""
    yield from _session_broker(tmp_path_factory, ApachePulsar, "apache_pulsar_plain")


@pytest.fixture(scope="session")
def apache_pulsar_secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with TLS, token authentication and authorization;
    ``.secure`` holds the certificates and tokens."""
    yield from _session_broker(
        tmp_path_factory, ApachePulsar, "apache_pulsar_secure", variant="secure"
    )


@pytest.fixture(scope="session")
def apache_pulsar_dedup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with deduplication and broker entry metadata."""
    yield from _session_broker(
        tmp_path_factory, ApachePulsar, "apache_pulsar_dedup", variant="dedup"
    )


@pytest.fixture(scope="session")
def apache_pulsar_stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with the stock data-lifecycle policies of a production
    broker on a fast clock (``tests.support.apache.STOCK_SETTINGS``): no retention, a
    ledger every 20 entries, closed ledgers no durable subscription needs deleted within
    about a second, topics with no subscription and no producer deleted after 3 s."""
    yield from _session_broker(
        tmp_path_factory, ApachePulsar, "apache_pulsar_stock", variant="stock"
    )


@pytest.fixture(scope="session")
def apache_pulsar_txn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with transactions on (one coordinator) and
    deduplication off."""
    yield from _session_broker(tmp_path_factory, ApachePulsar, "apache_pulsar_txn", variant="txn")


@pytest.fixture(scope="module", params=tuple(LINES), ids=tuple(LINES))
def apache_line(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApachePulsar]:
    """An Apache Pulsar of each line (``2.10``, ``3.3``, ``4.0``, ``4.2``), the ``line``
    variant, for one module; ``.line`` and ``.version`` say which. Module-scoped, so the
    last line's broker stops with the module too rather than idling to the session's end."""
    line: str = request.param
    name = "apache_line_" + line.replace(".", "_")
    yield from _session_broker(tmp_path_factory, ApachePulsar, name, line=line, variant="line")


@pytest.fixture
def fresh_pulsar_lite(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerFactory[PulsarLite]]:
    """A factory of function-scoped brokers: ``fresh_pulsar_lite(**config) -> PulsarLite``."""
    prefix = f"pl-{_node_slug(request, 40)}"
    yield from _fresh(tmp_path_factory, prefix, PulsarLite, lambda n, _: f"fresh-{n}")


@pytest.fixture
def fresh_apache_pulsar(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerFactory[ApachePulsar]]:
    """A factory of private Apache Pulsar instances (stop, restart and kill allowed):
    ``fresh_apache_pulsar(variant="plain", start=True) -> ApachePulsar``."""
    prefix = f"ap-{_node_slug(request, 40)}"

    def default_name(n: int, options: Mapping[str, Any]) -> str:
        return f"{prefix}-{options.get('variant', 'plain')}-{n}"

    yield from _fresh(tmp_path_factory, prefix, ApachePulsar, default_name)


@pytest.fixture(params=BROKER_KINDS, ids=BROKER_KINDS)
def broker(request: pytest.FixtureRequest) -> BrokerHandle:
    """Each broker kind in turn: the session pulsar-lite, then the session Apache Pulsar."""
    if request.param == "lite":
        lite: PulsarLite = request.getfixturevalue("pulsar_lite")
        return BrokerHandle("lite", lite.service_url, None, lite)
    apache: ApachePulsar = request.getfixturevalue("apache_pulsar")
    return BrokerHandle("apache", apache.service_url, apache.http_url, apache)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic of this test's own: ``persistent://public/default/<test>-<random>``."""
    return f"persistent://public/default/{_node_slug(request)}-{secrets.token_hex(4)}"


@pytest.fixture
def fault_proxy() -> Iterator[ProxyFactory]:
    """A factory of started :class:`FaultProxy` objects, all closed at teardown."""
    factory = ProxyFactory()
    try:
        yield factory
    finally:
        factory.close()


# ---------------------------------------------------------------------------
# Broker logs in failed-test reports; figures at the end
# ---------------------------------------------------------------------------

_LOG_MARKS = pytest.StashKey[dict[int, int]]()


def _used_by(item: pytest.Item) -> tuple[list[BrokerProcess], list[FaultProxy]]:
    """The brokers (each once) and the fault proxies among a test's fixture values."""
    brokers: list[BrokerProcess] = []
    proxies: list[FaultProxy] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, BrokerProcess):
            brokers.append(value)
        elif isinstance(value, BrokerHandle):
            brokers.append(value.instance)
        elif isinstance(value, BrokerFactory):
            brokers.extend(value.instances)
        elif isinstance(value, FaultProxy):
            proxies.append(value)
        elif isinstance(value, ProxyFactory):
            proxies.extend(value.instances)
    return list({id(b): b for b in brokers}.values()), proxies


def _log_sections(
    brokers: Iterable[BrokerProcess], marks: Mapping[int, int], lines: int = 200
) -> list[tuple[str, str]]:
    """Report sections ``(title, text)``: each broker's last ``lines`` log lines since its
    mark, or of all its log when it has none (a broker started by the test itself)."""
    sections = []
    for broker in brokers:
        since = marks.get(id(broker), 0)
        scope = "since the test began" if id(broker) in marks else "all"
        title = (
            f"{broker.report_label} {broker.name} log, {scope}, last {lines} lines "
            f"(whole log: {broker.log_path})"
        )
        sections.append((title, broker.log_tail(lines, since=since) or "(empty)"))
    return sections


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # Remember where each broker's log stood when the test body began.
    brokers, _ = _used_by(item)
    item.stash[_LOG_MARKS] = {id(b): b.log_size() for b in brokers}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    brokers, proxies = _used_by(item)
    report.sections.extend(_log_sections(brokers, item.stash.get(_LOG_MARKS, {})))
    for proxy in proxies:
        report.sections.append((f"fault proxy {proxy.service_url}", repr(proxy.stats())))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, after the session's brokers are torn down: hand their
    figures to the controller, which prints the summary (:func:`pytest_testnodedown`)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["broker_figures"] = dict(_FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The xdist controller: a worker's broker figures, for the summary."""
    _FIGURES.update(getattr(node, "workeroutput", {}).get("broker_figures", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FIGURES:
        terminalreporter.section("apache pulsar figures")
        for line in _FIGURES.values():
            terminalreporter.write_line(line)
    # The reliability tests' figures (``spark_faults.figure``: ``<name>.<key>`` properties),
    # one line per figure, so every run shows them without ``-s``.
    figures: dict[str, list[str]] = {}
    for kind in ("passed", "failed"):
        for report in terminalreporter.stats.get(kind, []):
            if getattr(report, "when", "") != "call":
                continue
            for key, value in getattr(report, "user_properties", []):
                name, _, field = str(key).partition(".")
                if field:
                    figures.setdefault(name, []).append(f"{field}={value}")
    share = time_share(terminalreporter.stats)
    if figures or share:
        terminalreporter.section("reliability figures")
        for name, values in figures.items():
            terminalreporter.write_line(f"{name}: " + ", ".join(values))
        if share:
            terminalreporter.write_line(share)
