"""review_app.app's JSON API, each guarantee tested by sending the request an outsider or a careless user would, on
SQLite and on PostgreSQL: sign-in (counted, locked, rotated, expiring), CSRF on every change, each object checked
against the account (another reviewer's queue, card, photo or answer; a day of no project; a path out of the day's
folders), blind audits and gold checks that look alike and keep their answers, bad input (a word outside the three, a
1 MiB note, an id reused for other content, a day that is gone) and the security headers."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from review_app.access import Settings
from review_app.web import CSP, MAX_BODY
from review_app.cards import CARD_KEYS
from tests.served import PASSWORD, build_app, client_of, decide, queue_of, sign_in

pytestmark = pytest.mark.usefixtures("fast_passwords")

DAY, OPEN = "days/day1", "today"


@pytest.fixture
def served(db_url, tmp_path, synthetic):
    app, store, project, lines = build_app(db_url, tmp_path, synthetic)
    yield app, store, project, lines
    store.close()


def _own_and_others(client, other: str = "李工") -> tuple[dict, dict]:
    """A card of the signed-in reviewer's queue and one only `other` decides."""
    mine = queue_of(client, DAY)
    mine_ids = {c["card"] for c in mine}
    lead = client_of(client.app, "组长")
    theirs = [c for c in queue_of(lead, DAY, reviewer=other) if c["card"] not in mine_ids]
    return mine[0], theirs[0]


# -- signing in ------------------------------------------------------------------------------------------------------
def test_sign_in_counts_wrong_passwords_locks_and_sets_a_strict_cookie(served):
    app, *_ = served
    client = client_of(app)
    assert client.get("/api/days").status_code == 401
    for _ in range(4):
        assert client.post("/api/login", json={"name": "王工", "password": "wrong password"}).status_code == 401
    locked = client.post("/api/login", json={"name": "王工", "password": "wrong password"})
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
    assert client.post("/api/login", json={"name": "王工", "password": PASSWORD}).status_code == 429
    other = client_of(app)
    r = other.post("/api/login", json={"name": "李工", "password": PASSWORD})
    assert r.status_code == 200 and set(r.json()) == {"csrf_token", "name", "role", "must_change_password"}
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert other.get("/api/me").json()["name"] == "李工"


def test_a_sign_in_rotates_the_session_and_sign_out_ends_it(served):
    app, *_ = served
    client = client_of(app, "王工")
    old = client.cookies.get("gq_session")
    sign_in(client, "王工")
    new = client.cookies.get("gq_session")
    assert new != old
    stale = client_of(app)
    stale.cookies.set("gq_session", old)
    assert stale.get("/api/days").status_code == 401
    assert client.post("/api/logout", headers={"X-CSRF-Token": ""}).status_code == 403   # sign-out needs it too
    assert client.post("/api/logout").status_code == 204
    client.cookies.set("gq_session", new)
    assert client.get("/api/days").status_code == 401


def test_an_expired_session_is_refused(db_url, tmp_path, synthetic):
    app, store, *_ = build_app(db_url, tmp_path, synthetic, settings=Settings(idle_seconds=60, lifetime_seconds=3600))
    client = client_of(app, "王工")
    assert client.get("/api/days").status_code == 200
    with store.write() as conn:
        store.execute(conn, "UPDATE sessions SET last_seen = last_seen - 61")
    r = client.get("/api/days")
    assert r.status_code == 401 and "sign in" in r.json()["error"]
    store.close()


def test_a_one_time_password_opens_nothing_but_the_password_change(served):
    app, store, *_ = served
    from review_app.accounts import add_account
    _, one_time = add_account(store, "新人", "reviewer")
    client = client_of(app)
    r = client.post("/api/login", json={"name": "新人", "password": one_time})
    assert r.status_code == 200 and r.json()["must_change_password"]
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    assert client.get("/api/days").status_code == 403
    assert client.post("/api/password", json={"old": one_time, "new": "mine, and long enough"}).status_code == 200
    assert client.get("/api/days").status_code == 200


# -- CSRF and roles --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("token", [None, "", "wrong-token"])
def test_every_change_needs_the_session_csrf_token(served, token):
    """Planted: the CSRF check skipped for /api/decisions stores a decision here."""
    app, store, *_ = served
    client = client_of(app, "王工")
    card = queue_of(client, DAY)[0]
    headers = {} if token is None else {"X-CSRF-Token": token}
    client.headers.pop("X-CSRF-Token")
    body = {"id": "evt-csrf-001", "day": DAY, "card": card["card"], "decision": "通过", "note": "", "base": 0}
    for path, payload in (("/api/decisions", body), ("/api/lease", {"day": OPEN, "card": card["card"]}),
                          ("/api/password", {"old": PASSWORD, "new": "another long password"})):
        r = client.post(path, json=payload, headers=headers)
        assert r.status_code == 403 and "CSRF" in r.json()["error"], (path, r.text)
    from review_app.decision_store import sync_state
    assert sync_state(store)["stored"] == 0


@pytest.mark.parametrize("who, method, path, body", [
    ("王工", "GET", "/api/reviewers", None), ("王工", "GET", "/api/promises", None),
    ("王工", "GET", "/api/monitor", None), ("王工", "GET", "/api/search?group=g", None),
    ("王工", "POST", "/api/reassign", {"day": DAY, "from": "李工", "to": "王工"}),
    ("王工", "POST", "/api/adjudications", {"id": "evt-adj-0001", "day": DAY, "card": "x", "decision": "通过",
                                            "reason": "a reason in words", "base": 0}),
    ("王工", "POST", "/api/acceptances", {"point": "eval/operating_point.json", "words": "accepted, in words"}),
    ("组长", "POST", "/api/acceptances", {"point": "eval/operating_point.json", "words": "accepted, in words"}),
    ("老板", "POST", "/api/decisions", {"id": "evt-own-0001", "day": DAY, "card": "x", "decision": "通过", "base": 0}),
    ("老板", "POST", "/api/reassign", {"day": DAY, "from": "李工", "to": "王工"}),
])
def test_a_role_does_only_its_own_work(served, who, method, path, body):
    app, *_ = served
    client = client_of(app, who)
    r = client.request(method, path, json=body)
    assert r.status_code == 403 and "role" in r.json()["error"], r.text


# -- each object against the account ---------------------------------------------------------------------------------
def test_a_reviewer_reaches_nothing_of_another_reviewers_queue(served):
    """Another queue, its card, its photo, its model answer: all 404 or 403, as for a card that does not exist
    (planted: may_decide returning True for any reviewer decides 李工's card)."""
    app, *_ = served
    client = client_of(app, "王工")
    mine, theirs = _own_and_others(client)
    assert client.get("/api/queue", params={"day": DAY, "reviewer": "李工"}).status_code == 403
    r = decide(client, DAY, theirs["card"])
    assert r.status_code == 404 and "in your queue" in r.json()["error"]
    assert client.get(theirs["photos"][0]["url"]).status_code == 404
    assert client.get("/api/answer", params={"day": DAY, "card": theirs["card"]}).status_code == 404
    assert decide(client, DAY, mine["card"]).status_code == 201
    assert client.get(mine["photos"][0]["url"]).status_code == 200


@pytest.mark.parametrize("day", ["../..", "%2e%2e", "/etc", "days/day1/..", "days", "no-such-day", "labels",
                                 str(os.sep), "days/day1/BBU接地线检查_verdicts.jsonl"])
def test_a_day_is_only_a_judged_day_of_this_project(served, day):
    app, *_ = served
    client = client_of(app, "王工")
    r = client.get("/api/queue", params={"day": day})
    assert r.status_code == 404 and "no day" in r.json()["error"]


def test_photos_never_leave_the_days_folders(served, tmp_path):
    """A photo URL names a card and a position, never a path; a verdict line that names one out (../, an absolute
    path, a symlink out of the folder) is not served (planted: project.photo without its inside check serves
    /etc/hostname)."""
    app, store, project, lines = served
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"\xff\xd8 not yours")
    first = lines[OPEN][0]
    folder = project / "photos" / "field"
    (folder / "link.jpg").symlink_to(outside)
    bad = {"group_id": "bad-1", "images": ["../../../secret.jpg", str(outside), "link.jpg", "/etc/hostname",
                                           first["images"][0]]}
    path = project / OPEN / f"{first['mission']}_verdicts.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({**first, **bad}, ensure_ascii=False) + "\n")
    client = client_of(app, "王工")
    card = next(c for c in queue_of(client, OPEN) if c["group_id"] == "bad-1")
    statuses = [client.get(p["url"]).status_code for p in card["photos"]]
    assert statuses == [404, 404, 404, 404, 200]
    for n in ("0", "6", "-1", "1e3", "../1"):
        assert client.get("/api/photo", params={"day": OPEN, "card": card["card"], "n": n}).status_code in (404, 422)
    for url in ("/api/photo?day=..%2F..&card=x&n=1", "/static/..%2Fapp.py", "/static/../app.py", "/../etc/passwd"):
        assert client.get(url).status_code == 404, url


def test_a_blind_audit_and_a_gold_check_look_alike_and_keep_their_answers(served):
    """Every card has the same keys; no blind card carries the model's verdict, p_fail or reason, nor a gold check
    its known answer, anywhere in what the browser gets (planted: card_view passing the facts of a blind card; the
    page's old base64 seal held them). The model's answer comes after this account's decision, a gold check's
    known answer never."""
    app, _, _, lines = served
    client = client_of(app, "王工")
    cards = queue_of(client, DAY)
    assert all(tuple(c) == CARD_KEYS for c in cards)
    blind = [c for c in cards if c["blind"]]
    gold_ids = {v["group_id"] for v in lines[DAY] if v.get("gold")}
    assert blind and any(c["group_id"] in gold_ids for c in queue_of(client_of(app, "组长"), DAY) if c["blind"])
    text = json.dumps(queue_of(client_of(app, "组长"), DAY), ensure_ascii=False)
    assert "earlier.jsonl" not in text and '"gold' not in text and "gold_label" not in text
    by_id = {v["group_id"]: v for v in lines[DAY]}
    for c in blind:
        raw = json.dumps(c, ensure_ascii=False)
        v = by_id[c["group_id"]]
        assert v["reason"] not in raw and str(v["p_fail"]) not in raw and v["verdict"] not in raw
        assert c["reason"] is None and c["reply"] is None and len(c["facts"]) == 1
        assert client.get("/api/answer", params={"day": DAY, "card": c["card"]}).status_code == 403
    c = blind[0]
    assert decide(client, DAY, c["card"], "通过").status_code == 201
    shown = client.get("/api/answer", params={"day": DAY, "card": c["card"]})
    assert shown.status_code == 200 and set(shown.json()) == {"facts", "reason", "reply", "cited"}
    assert "gold" not in shown.text and "earlier.jsonl" not in shown.text


# -- bad input -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, status, words", [
    ({"decision": "pass"}, 422, "decision"), ({"decision": "通过 "}, 422, "decision"),
    ({"note": "长" * 2001}, 422, "note"), ({"note": "x" * (1024 * 1024)}, 413, "KiB"),
    ({"base": -1}, 422, "base"), ({"id": "short"}, 422, "id"), ({"id": "../../x-aaaa"}, 422, "id"),
    ({"day": "no-such-day"}, 404, "no day"), ({"card": "no-such-card"}, 404, "no card"),
])
def test_a_decision_that_cannot_be_one_is_refused_with_a_sentence(served, change, status, words):
    app, store, *_ = served
    client = client_of(app, "王工")
    card = queue_of(client, DAY)[0]
    body = {"id": "evt-bad-00001", "day": DAY, "card": card["card"], "decision": "通过", "note": "", "base": 0,
            **change}
    r = client.post("/api/decisions", json=body)
    assert r.status_code == status and words in r.json()["error"], r.text
    from review_app.decision_store import sync_state
    assert sync_state(store)["stored"] == 0


def test_the_same_id_with_other_content_is_refused_by_name(served):
    app, *_ = served
    client = client_of(app, "王工")
    card = queue_of(client, DAY)[0]
    assert decide(client, DAY, card["card"], "通过", event_id="evt-same-0001").status_code == 201
    again = decide(client, DAY, card["card"], "通过", event_id="evt-same-0001")
    assert again.status_code == 200 and again.json()["version"] == 1
    other = decide(client, DAY, card["card"], "不通过", event_id="evt-same-0001")
    assert other.status_code == 422 and "evt-same-0001" in other.json()["error"]


def test_a_decision_for_a_day_that_is_gone_is_refused(served):
    app, _, project, _ = served
    client = client_of(app, "王工")
    card = queue_of(client, DAY)[0]
    shutil.rmtree(project / DAY)
    r = decide(client, DAY, card["card"])
    assert r.status_code == 404 and "no day" in r.json()["error"]


# -- what every answer carries ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/login", "/review", "/lead", "/owner", "/password", "/api/days"])
def test_every_answer_has_a_strict_content_security_policy_and_pages_no_inline_script(served, path):
    app, *_ = served
    client = client_of(app, "王工")
    r = client.get(path)
    assert r.headers["content-security-policy"] == CSP and "'unsafe-inline'" not in CSP
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    if path.startswith("/api/"):
        assert r.headers["cache-control"] == "no-store"
    else:
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", r.text, flags=re.S)
        assert scripts and all('src="/static/' in attrs and not body.strip() for attrs, body in scripts)
        assert " on" not in re.sub(r'"[^"]*"', "", r.text).lower().replace("one", "")   # no onclick= and the like


def test_a_request_body_over_the_limit_is_refused_before_it_is_read(served):
    app, *_ = served
    client = client_of(app, "王工")
    r = client.post("/api/decisions", content=b"{" + b" " * (MAX_BODY + 10) + b"}",
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_the_openapi_schema_names_the_api(served):
    app, *_ = served
    paths = client_of(app).get("/api/openapi.json").json()["paths"]
    assert {"/api/login", "/api/days", "/api/queue", "/api/decisions", "/api/reviewers", "/api/promises"} <= set(paths)
