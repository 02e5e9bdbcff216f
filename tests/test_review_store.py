"""review_app.store, review_app.accounts and review_app.decision_store, on SQLite and on PostgreSQL (the db_url
fixture): the migrations from every earlier version with data, accounts (look-alike names, one-time passwords,
sign-in failures and locks, sessions that expire and rotate), and decisions stored once with their versions, leases
and races between threads."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from review_app import accounts, decision_store
from review_app.migrations import LATEST, MIGRATIONS
from review_app.project import Card
from review_app.store import Store, StoreError
from tests.served import PASSWORD, add_account

pytestmark = pytest.mark.usefixtures("fast_passwords")


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    s.migrate()
    yield s
    s.close()


def _card(n: int = 1, day: str = "days/day1") -> Card:
    line = {"group_id": f"g{n}", "mission": "BBU接地线检查", "verdict": "通过", "p_fail": 0.1}
    return Card(f"card{n:04d}", day, "BBU接地线检查", f"g{n}", line, Path("/p/days/day1/BBU接地线检查_verdicts.jsonl"),
                (), False, n)


# -- schema ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start", range(0, LATEST))
def test_a_database_at_every_earlier_version_migrates_with_its_data(db_url, start):
    """Planted: a migration that recreates a table (its rows lost), or one applied twice, fails here."""
    s = Store(db_url)
    assert s.migrate(to=start) == start and s.version() == start
    if start >= 1:
        account = add_account(s, "王工", "reviewer")
        assert decision_store.record(s, event_id="evt-00000001", account=account, card=_card(), decision="不通过",
                                     note="", base=0).status == 201
    assert s.migrate() == LATEST and s.version() == LATEST
    assert s.migrate() == LATEST   # again: nothing to do
    if start >= 1:
        assert [a.name for a in s.accounts()] == ["王工"]
        assert decision_store.sync_state(s)["stored"] == 1
    s.close()


def test_a_database_newer_than_the_code_is_refused_and_left_alone(db_url):
    s = Store(db_url)
    s.migrate()
    with s.write() as conn:
        s.execute(conn, "INSERT INTO schema_version (version, applied_at) VALUES (:v, 'x')", v=LATEST + 1)
    with pytest.raises(StoreError, match=f"schema version {LATEST + 1}, newer than this group-qc knows"):
        s.migrate()
    s.close()


def test_every_migration_is_numbered_in_order():
    assert [n for n, _, _ in MIGRATIONS] == list(range(1, LATEST + 1))


# -- accounts --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("second", ["王 工", "王　工", "REVIEWER-DAY4", "ｒｅｖｉｅｗｅｒ－ｄａｙ４",
                                    "reviewer\u2011day4", "reviewer - day4", "r\u0435viewer-day4"])
def test_a_look_alike_of_an_account_name_is_refused(store, second):
    """One person, one name: a second spelling of an account is no second account (planted: the skeleton's look-alike
    table emptied lets the Cyrillic е through)."""
    first = "王工" if second.startswith("王") else "reviewer-day4"
    accounts.add_account(store, first, "reviewer")
    with pytest.raises(StoreError, match="looks like the account"):
        accounts.add_account(store, second, "reviewer")


@pytest.mark.parametrize("name, role, message", [
    ("", "reviewer", "empty name"), ("--", "reviewer", "no letter or digit"), ("a\u202eb", "reviewer", "U\\+202E"),
    ("王工", "admin", "give one of reviewer, lead, owner")])
def test_an_account_a_rule_refuses_is_not_made(store, name, role, message):
    with pytest.raises(accounts.AccountError, match=message):
        accounts.add_account(store, name, role)
    assert store.accounts() == []


def test_a_one_time_password_signs_in_once_and_must_be_replaced(store):
    account, one_time = accounts.add_account(store, "李工", "reviewer")
    assert account.must_change and len(one_time) >= 20
    done = accounts.sign_in(store, "李工", one_time, "c1")
    assert done.account.must_change
    with pytest.raises(accounts.AccountError, match="10 to"):
        accounts.change_password(store, done.account, done.token, one_time, "short")
    accounts.change_password(store, done.account, done.token, one_time, PASSWORD)
    with pytest.raises(accounts.SignInRefused):
        accounts.sign_in(store, "李工", one_time, "c1")
    assert not accounts.sign_in(store, "李工", PASSWORD, "c1").account.must_change


def test_wrong_passwords_lock_the_name_whether_or_not_it_is_an_account(store):
    """Planted: a lock counted for accounts only tells an attacker which names exist."""
    add_account(store, "王工", "reviewer")
    for name in ("王工", "nobody"):
        for _ in range(accounts.MAX_FAILURES - 1):
            with pytest.raises(accounts.SignInRefused) as refused:
                accounts.sign_in(store, name, "wrong password", f"client-{name}")
            assert refused.value.status == 401
        with pytest.raises(accounts.SignInRefused) as refused:
            accounts.sign_in(store, name, "wrong password", f"client-{name}")
        assert refused.value.status == 429 and refused.value.retry_after > 0
    with pytest.raises(accounts.SignInRefused) as refused:   # locked: even the right password waits
        accounts.sign_in(store, "王工", PASSWORD, "another client")
    assert refused.value.status == 429


def test_a_session_ends_when_it_is_idle_or_old_and_a_sign_in_rotates_it(store):
    add_account(store, "王工", "reviewer")
    first = accounts.sign_in(store, "王工", PASSWORD, "c")
    t = decision_store.now()
    assert store.session(first.token, t, idle=60, lifetime=3600)[0].name == "王工"
    assert store.session(first.token, t + 61, idle=60, lifetime=3600) is None          # idle
    second = accounts.sign_in(store, "王工", PASSWORD, "c")
    assert store.session(second.token, t + 3601, idle=10**6, lifetime=3600) is None   # old
    third = accounts.sign_in(store, "王工", PASSWORD, "c")
    fourth = accounts.sign_in(store, "王工", PASSWORD, "c", came_with=third.token)     # rotated at sign-in
    assert store.session(third.token, t, 60, 3600) is None and store.session(fourth.token, t, 60, 3600) is not None
    assert fourth.token != third.token and fourth.csrf != third.csrf
    account = store.account_by_name("王工")
    store.set_disabled(account.id, True)
    assert store.session(fourth.token, t, 60, 3600) is None


# -- decisions -------------------------------------------------------------------------------------------------------
def test_a_decision_is_stored_once_per_id_and_versions_refuse_a_stale_write(store):
    """The API's contract on the store (planted: the id check after the version check answers a resend with 409)."""
    a = add_account(store, "王工", "reviewer")
    b = add_account(store, "李工", "reviewer")
    card = _card()

    def rec(event_id, who, decision, base, note=""):
        return decision_store.record(store, event_id=event_id, account=who, card=card, decision=decision,
                                     note=note, base=base)
    first = rec("evt-aaaaaaa1", a, "不通过", 0)
    assert (first.status, first.body["version"]) == (201, 1)
    again = rec("evt-aaaaaaa1", a, "不通过", 0)                      # a resend: the same answer, stored once
    assert again.status == 200 and again.body["version"] == 1 and again.body["decided_at"] == first.body["decided_at"]
    other = rec("evt-aaaaaaa1", a, "通过", 0)                        # the same id, other content
    assert other.status == 422 and "evt-aaaaaaa1" in other.body["error"]
    stale = rec("evt-aaaaaaa2", a, "通过", 0)                        # a second tab that saw version 0
    assert stale.status == 409 and (stale.body["version"], stale.body["decision"]) == (1, "不通过")
    assert rec("evt-aaaaaaa3", a, "通过", 1).body["version"] == 2    # on the version it saw: stored
    assert rec("evt-bbbbbbb1", b, "不通过", 0).status == 201         # an overlap's second reviewer: no conflict
    assert decision_store.sync_state(store)["stored"] == 3
    rows = {(r["name"], r["version"], r["decision"]) for r in decision_store.decisions_of_day(store, card.day)}
    assert rows == {("王工", 2, "通过"), ("李工", 1, "不通过")}
    events = decision_store.histories(store, {card.day})[(card.day, card.id, a.id)]
    assert [(e.version, e.decision) for e in events] == [(1, "不通过"), (2, "通过")]


def test_concurrent_resends_and_tabs_store_one_decision_each(store):
    """Eight threads send one id at once, then eight tabs each send their own id on version 0: one stored each time,
    the others answered with the stored decision (200) or 409, never two rows (planted: the compare-and-set update
    without its version condition lets two tabs both win)."""
    a = add_account(store, "王工", "reviewer")
    card = _card()
    with ThreadPoolExecutor(8) as pool:
        same = list(pool.map(lambda _: decision_store.record(store, event_id="evt-same0001", account=a, card=card,
                                                             decision="不通过", note="", base=0), range(8)))
    assert sorted(o.status for o in same) == [200] * 7 + [201]
    with ThreadPoolExecutor(8) as pool:
        tabs = list(pool.map(lambda k: decision_store.record(store, event_id=f"evt-tab{k:05d}", account=a, card=card,
                                                             decision="通过", note=str(k), base=1), range(8)))
    assert sorted(o.status for o in tabs) == [201] + [409] * 7
    assert decision_store.sync_state(store)["stored"] == 2


def test_a_shared_queue_gives_a_card_to_one_reviewer(store):
    """Leases: the card on one reviewer's screen is theirs until the lease ends; a card one reviewer decided is not
    another's (planted: the lease upsert taking a live lease from its holder)."""
    a = add_account(store, "王工", "reviewer")
    b = add_account(store, "李工", "reviewer")
    card, other = _card(1), _card(2)
    assert decision_store.lease(store, card, a) is None
    assert decision_store.lease(store, card, b)["name"] == "王工"
    taken = decision_store.record(store, event_id="evt-lease001", account=b, card=card, decision="通过", note="",
                                  base=0, exclusive=True)
    assert taken.status == 409 and taken.body["leased_to"] == "王工"
    assert decision_store.record(store, event_id="evt-lease002", account=a, card=card, decision="通过", note="",
                                 base=0, exclusive=True).status == 201
    assert decision_store.lease(store, card, b, seconds=1) is not None
    with store.write() as conn:   # the lease runs out
        store.execute(conn, "UPDATE leases SET until_at = 0")
    late = decision_store.record(store, event_id="evt-lease003", account=b, card=card, decision="通过", note="",
                                 base=0, exclusive=True)
    assert late.status == 409 and late.body["decided_by"] == "王工"
    # two reviewers racing for a fresh card: one wins
    barrier = threading.Barrier(2)

    def race(who):
        barrier.wait()
        return decision_store.record(store, event_id=f"evt-race-{who.name}", account=who, card=other,
                                     decision="不通过", note="", base=0, exclusive=True).status
    with ThreadPoolExecutor(2) as pool:
        assert sorted(pool.map(race, [a, b])) == [201, 409]


def test_reassignments_move_cards_and_follow_a_second_move(store):
    lead = add_account(store, "组长", "lead")
    decision_store.reassign(store, "d", ["c1", "c2"], "王工", "李工", lead)
    assert decision_store.moves_of(store, "d") == {"c1": {"王工": "李工"}, "c2": {"王工": "李工"}}
    decision_store.reassign(store, "d", ["c1"], "李工", "张工", lead)      # moved on from its current holder
    decision_store.reassign(store, "d", ["c2"], "李工", "王工", lead)      # back to the judge's own name
    assert decision_store.moves_of(store, "d") == {"c1": {"王工": "张工"}}


def test_passwords_are_hashed_with_argon2id_at_its_recommended_cost():
    """The production hasher (the fast_passwords fixture is not used here): argon2id, RFC 9106's second recommended
    setting as argon2-cffi ships it, never the password itself."""
    from argon2 import PasswordHasher
    saved = list(accounts._HASHER)
    accounts._HASHER.clear()
    try:
        digest = accounts.hash_password("a long enough password")
    finally:
        accounts._HASHER[:] = saved
    params = PasswordHasher().time_cost, PasswordHasher().memory_cost
    assert digest.startswith("$argon2id$") and f"m={params[1]},t={params[0]}" in digest
    assert "a long enough password" not in digest
