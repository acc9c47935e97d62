"""The operator's view of a 3-broker cluster (issue 43), on one cluster for the whole file: a real
Prometheus (Debian's `prometheus`) scrapes the three metrics listeners every second without an
error and holds every Skiff metric family and the bytes-in counter the brokers report; the Grafana
dashboard in docs/operating/ queries only families the brokers expose; and the status page at `/`,
loaded in headless Chromium (Debian's `chromium`), shows the three brokers and the controller, and
a SIGKILLed broker as gone within its session timeout. The page's screenshot is kept under the
test's tmp dir (its path is printed) and copied to docs/operating/status-page.png."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES, free_port
from test_cluster import METRICS, SESSION_MS, SkiffCluster, dump_logs, wait_for
from test_replication import ready

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(REPO, "docs", "operating", "grafana-dashboard.json")
SCREENSHOT_DOC = os.path.join(REPO, "docs", "operating", "status-page.png")
TOPIC = "watched"
RECORDS = 2000
VALUE_BYTES = 1000
SCRAPE_INTERVAL_S = 1
# How long the page's load ring needs to hold two samples of every broker, one with traffic (one
# sample per load report interval, 5 s, and reports as often), before a broker is killed.
RING_FILLED_S = 20
# The page polls every 2 s; a dump adds Chromium's start.
PAGE_REFRESH_S = 2
GONE_BOUND_S = SESSION_MS / 1000 + PAGE_REFRESH_S + 5
# Virtual time Chromium gives the page's script before dumping (two polls).
CHROMIUM_BUDGET_MS = 3000


def metrics_address(broker):
    return [METRICS.search(line).group(1) for line in broker.log_lines if METRICS.search(line)][-1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def exposition(broker):
    return get(f"http://{metrics_address(broker)}/metrics")


def sample_names(text):
    """Names with at least one sample (histograms as their _bucket/_sum/_count series)."""
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def declared_names(text):
    """Every name a `# TYPE` line declares, with a histogram's or summary's series names."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind in ("histogram", "summary"):
                names.update({name + "_bucket", name + "_sum", name + "_count"})
    return names


def unlabelled(text, name):
    return sum(float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))


@pytest.fixture(scope="module")
def cluster(etcd):
    cluster = SkiffCluster(etcd, 3).start()
    try:
        ready(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": cluster.brokers[0].bootstrap, "acks": "all", "linger.ms": 5})
        for n in range(RECORDS):
            producer.produce(TOPIC, b"v" * VALUE_BYTES, key=str(n).encode(), partition=n % 3)
            producer.poll(0)
        assert producer.flush(30) == 0
        yield cluster
    finally:
        dump_logs(cluster)
        cluster.stop()


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory):
    if shutil.which("prometheus") is None:
        pytest.skip("Debian's prometheus is not installed (scripts/install-clients.sh)")
    directory = tmp_path_factory.mktemp("prometheus")
    config = directory / "prometheus.yml"
    targets = [metrics_address(b) for b in cluster.brokers]
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "scrape_timeout": f"{SCRAPE_INTERVAL_S}s"},
        "scrape_configs": [{"job_name": "skiff", "static_configs": [{"targets": targets}]}],
    }))
    address = f"127.0.0.1:{free_port()}"
    log = open(directory / "prometheus.log", "w")
    process = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                                f"--web.listen-address={address}"], stdout=log, stderr=log)
    try:
        wait_for(lambda: ready_prometheus(address), 30, "Prometheus ready")
        yield address, targets
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def ready_prometheus(address):
    try:
        return "Ready" in get(f"http://{address}/-/ready", timeout=1)
    except OSError:
        return False


def api(address, path, **query):
    answer = json.loads(get(f"http://{address}/api/v1/{path}?{urllib.parse.urlencode(query)}"))
    assert answer["status"] == "success", answer
    return answer["data"]


def test_prometheus_scrapes_every_broker_and_holds_every_family(cluster, prometheus):
    address, targets = prometheus

    def all_up():
        active = api(address, "targets")["activeTargets"]
        return len(active) == 3 and all(t["health"] == "up" and t["lastError"] == "" for t in active) and active
    active = wait_for(all_up, 15, "three healthy targets")
    up = {r["metric"]["instance"]: r["value"][1] for r in api(address, "query", query="up")["result"]}
    assert up == {target: "1" for target in targets}, up

    # The brokers add their partitions' bytes into the totals every load sample (5 s): wait until
    # the totals cover what was produced and hold still.
    def settled_totals():
        texts = [exposition(b) for b in cluster.brokers]
        return texts if unlabelled("".join(texts), "skiff_broker_messages_in_total") == RECORDS else None
    texts = wait_for(settled_totals, 15, f"{RECORDS} records counted in the brokers' totals")
    bytes_in = sum(unlabelled(text, "skiff_broker_bytes_in_total") for text in texts)
    assert RECORDS * VALUE_BYTES <= bytes_in < RECORDS * (VALUE_BYTES + 100), bytes_in

    def scraped_bytes_in():
        result = api(address, "query", query="sum(skiff_broker_bytes_in_total)")["result"]
        return result and float(result[0]["value"][1]) == bytes_in and result[0]["value"][1]
    wait_for(scraped_bytes_in, 3 * SCRAPE_INTERVAL_S + 2, f"Prometheus' sum(skiff_broker_bytes_in_total) == {bytes_in:.0f}")
    messages = api(address, "query", query="sum(skiff_broker_messages_in_total)")["result"]
    assert float(messages[0]["value"][1]) == RECORDS, messages

    exposed = set().union(*(sample_names(text) for text in texts))
    wait_for(lambda: exposed <= set(api(address, "label/__name__/values")), 3 * SCRAPE_INTERVAL_S + 2,
             "every exposed family in Prometheus")
    missing = exposed - set(api(address, "label/__name__/values"))
    assert not missing, sorted(missing)
    report = (f"prometheus: 3 targets up, no scrape errors ({', '.join(t['scrapeUrl'] for t in active)}); "
              f"{len(exposed)} Skiff series names all present; sum(skiff_broker_bytes_in_total) = {bytes_in:.0f} "
              f"for {RECORDS} records of {VALUE_BYTES} bytes, as the brokers report")
    print(report)
    SUMMARY_LINES.append(report)


def dashboard_exprs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from dashboard_exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from dashboard_exprs(item)


def test_the_grafana_dashboard_queries_only_families_the_brokers_expose(cluster):
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exprs = list(dashboard_exprs(dashboard))
    assert len(exprs) >= 7, exprs
    exposed = set().union(*(declared_names(exposition(b)) for b in cluster.brokers))
    for expr in exprs:
        names = set(re.findall(r"\bskiff_[a-z0-9_]+", expr))
        assert names, f"no Skiff metric in {expr!r}"
        assert names <= exposed, (expr, sorted(names - exposed))
    titles = " ".join(panel.get("title", "").lower() for panel in dashboard["panels"])
    for topic in ("throughput", "latency", "down-conversion", "replication lag", "isr", "controller", "placement"):
        assert topic in titles, (topic, titles)


def chromium(*arguments, tmp):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (scripts/install-clients.sh)")
    profile = tmp / f"profile-{time.monotonic_ns()}"
    result = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", f"--user-data-dir={profile}", "--window-size=1280,1100",
                             "--hide-scrollbars", f"--virtual-time-budget={CHROMIUM_BUDGET_MS}", *arguments],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    shutil.rmtree(profile, ignore_errors=True)
    return result.stdout


def produce_until(cluster, stop):
    producer = Producer({"bootstrap.servers": cluster.brokers[0].bootstrap, "linger.ms": 20})
    n = 0
    while not stop.is_set():
        producer.produce(TOPIC, b"w" * VALUE_BYTES, partition=n % 3)
        producer.poll(0)
        n += 1
        if n % 50 == 0:
            time.sleep(0.02)
    producer.flush(10)


def page_text(url, tmp):
    """The page's text once its script rendered a snapshot (tags stripped)."""
    dom = chromium("--dump-dom", url, tmp=tmp)
    assert "data-rendered=" in dom, dom[:2000]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def test_the_status_page_shows_the_cluster_and_a_killed_broker_as_gone(cluster, tmp_path):
    def the_controller():
        controller = json.loads(get(f"http://{metrics_address(cluster.brokers[0])}/status.json"))["controller"]
        return controller is not None and [controller]
    [controller] = wait_for(the_controller, 10, "a controller")
    watcher = next(b for i, b in enumerate(cluster.brokers) if i != controller)
    url = f"http://{metrics_address(watcher)}/"

    def ring_filled():
        snapshot = json.loads(get(url + "status.json"))
        full = [s for s in snapshot["load_history"] if len(s["loads"]) == 3]
        return len(full) >= 2 and any(load > 0 for s in full for load in s["loads"].values())
    # Traffic while the ring fills, so that the plot has something to draw.
    stop = threading.Event()
    writer = threading.Thread(target=produce_until, args=(cluster, stop), daemon=True)
    writer.start()
    try:
        wait_for(ring_filled, RING_FILLED_S, "two load samples of all three brokers")
    finally:
        stop.set()
        writer.join(30)
    text = page_text(url, tmp_path)
    assert "Brokers: 3 registered" in text, text
    assert f"controller: broker {controller}" in text, text
    assert text.count("running") == 3, text
    # The controller's page also shows the shedder's last cycle.
    screenshot = tmp_path / "status-page.png"
    chromium(f"--screenshot={screenshot}", f"http://{metrics_address(cluster.brokers[controller])}/", tmp=tmp_path)
    assert screenshot.stat().st_size > 10_000
    print(f"status page screenshot: {screenshot}")
    SUMMARY_LINES.append(f"status page: screenshot of a 3-broker cluster at {screenshot}")
    if os.environ.get("SKIFF_UPDATE_DOCS_SCREENSHOT"):
        shutil.copy(screenshot, SCREENSHOT_DOC)

    victim_id = next(i for i in range(3) if i not in (controller, cluster.brokers.index(watcher)))
    killed_at = time.monotonic()
    cluster.brokers[victim_id].stop(signal.SIGKILL)

    def shows_gone():
        text = page_text(url, tmp_path)
        return "Brokers: 2 registered, 1 gone" in text and text
    text = wait_for(shows_gone, GONE_BOUND_S, f"broker {victim_id} shown as gone")
    took = time.monotonic() - killed_at
    assert re.search(rf"\b{victim_id} gone\b", text), text
    SUMMARY_LINES.append(f"status page: SIGKILLed broker shown as gone after {took:.1f} s (session {SESSION_MS} ms)")
