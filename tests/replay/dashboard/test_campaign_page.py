"""A campaign on the dashboard: the campaigns list, the campaign's JSON model (items, per
device the charts and the queue with why each item is where it is, spend per day, runs with
links), its static report, and, in a real browser, its page. The campaign is a synthetic log
(tests/shared/campaign_log.py: the real scheduler core fed the inputs a driver would
publish) exported where a campaign's log lives, `<root>/campaigns/<id>/log.aolog`."""

from __future__ import annotations

import json
import urllib.request

import pytest
from campaign_log import CID, synthetic_campaign

from accelopt import catalog as c
from events.logfile import LogWriter, write_events
from replay.dashboard.browser import ServerThread


@pytest.fixture(scope="module")
def campaign_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash-campaign") / "runs"
    events = synthetic_campaign()
    write_events(root / "campaigns" / CID / "log.aolog", events)
    with ServerThread(root, scan_interval_s=0.2) as server:
        yield server, events


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=20) as r:
        return json.loads(r.read())


def test_the_campaign_is_listed_and_its_model_says_where_each_item_is_and_why(campaign_root) -> None:
    server, events = campaign_root
    runs = get_json(server.url + "/api/runs")
    (row,) = runs["campaigns"]
    scheduled = [e for e in events if isinstance(e, c.CampaignRunScheduled)]
    assert (
        row["campaign_id"] == CID and row["runs"] == len(scheduled) and row["status"] == "completed (budget)"
    )
    m = get_json(server.url + f"/api/campaign/{CID}")
    assert m["campaign"]["spend_text"] == "$1.9000 / $2.0000"  # spent of the total budget
    assert {r[0] for r in m["items"]} == {e.key for e in events[0].items}
    assert [d["device"] for d in m["devices"]] == ["cpu", "trn1"]
    cpu = m["devices"][0]
    last = [s for s in scheduled if s.device == "cpu"][-1]
    assert [q[1] for q in cpu["queue"]] == [q.item for q in last.queue]  # the last decision's queue, in order
    assert cpu["queue"][0][2] == "picked" and cpu["queue"][0][4] == last.reason.why
    assert 'data-series="silu"' in cpu["speedup_svg"] and "<svg" in cpu["pct_svg"]
    assert list(m["spend_per_day"].values()) == pytest.approx([0.05 * len(scheduled)])
    assert [r[1] for r in m["runs"]] == [s.run for s in reversed(scheduled)]


def test_the_campaign_report_is_served(campaign_root) -> None:
    server, _ = campaign_root
    with urllib.request.urlopen(server.url + f"/campaign-report/{CID}", timeout=20) as r:
        html = r.read().decode()
    assert "The queues: where each item is, and why" in html and "cpu_v2/silu@cpu" in html


def test_the_campaign_page_in_a_browser(campaign_root, browser) -> None:
    server, events = campaign_root
    page = browser.new_page()
    try:
        page.goto(server.url + f"/campaign/{CID}")
        page.wait_for_selector("#campaign-runs-table table", timeout=20_000)
        assert page.inner_text("#campaign-status") == "completed (budget)"
        assert "cpu_v2/silu@cpu" in page.inner_text("#campaign-items")
        assert page.locator("[data-device=cpu] svg.chart, [data-device=cpu] svg").count() >= 2
        n = sum(isinstance(e, c.CampaignRunScheduled) for e in events)
        assert page.locator("#campaign-runs-table tbody tr").count() == n
        page.goto(server.url + "/")
        page.wait_for_selector(f"tr[data-campaign='{CID}']", timeout=20_000)
    finally:
        page.close()


def test_a_campaign_folder_without_a_campaign_is_not_listed(tmp_path) -> None:
    """A folder an older version made for a mistyped `campaign resume` id (an exported log with
    no CampaignStarted) is not a nameless campaign in the list: it is a warning."""
    root = tmp_path / "runs"
    write_events(root / "campaigns" / CID / "log.aolog", synthetic_campaign())
    (root / "campaigns" / "mistyped").mkdir(parents=True)
    with LogWriter(root / "campaigns" / "mistyped" / "log.aolog", "mistyped"):
        pass  # what the driver exported for an id whose log had no event
    with ServerThread(root, scan_interval_s=0.2) as server:
        runs = get_json(server.url + "/api/runs")
    assert [c["campaign_id"] for c in runs["campaigns"]] == [CID]
    assert any("mistyped" in w and "no CampaignStarted" in w for w in runs["warnings"])
