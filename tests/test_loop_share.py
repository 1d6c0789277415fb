"""LoopShare: bulk steps per pass of the event loop are bounded, every task gets its turns, timers stay on time."""

from __future__ import annotations

import asyncio

import pytest

from voxline.base import loop_share as share_module
from voxline.base.loop_share import MAX_WAIT_PASSES, LoopShare, Slices, loop_share

from tests.support.loop_passes import Passes


async def _bulk(share: LoopShare, passes: Passes, name: int, steps: int, log: list[tuple[int, int]]) -> None:
    for _ in range(steps):
        await share.turn()
        log.append((passes.n, name))


def test_each_pass_lets_a_bounded_number_of_steps_go_and_none_starves() -> None:
    async def main() -> tuple[list[tuple[int, int]], int]:
        passes = Passes()
        share = LoopShare(steps=4)
        log: list[tuple[int, int]] = []
        await asyncio.gather(*(_bulk(share, passes, name, 10, log) for name in range(20)))
        passes.stop()
        return log, share.waiting

    log, waiting = asyncio.run(main())
    assert len(log) == 200 and waiting == 0
    per_pass: dict[int, int] = {}
    for n, _name in log:
        per_pass[n] = per_pass.get(n, 0) + 1
    assert max(per_pass.values()) <= 8  # 4 turns at once, 4 released: never the 20 tasks at once
    by_task: dict[int, list[int]] = {}
    for n, name in log:
        by_task.setdefault(name, []).append(n)
    # first come, first served: a task waits for at most the tasks ahead of it, 4 per pass
    assert max(b - a for steps in by_task.values() for a, b in zip(steps, steps[1:])) <= 20 // 4 + 2


def test_a_timer_is_late_by_at_most_a_few_steps_however_many_tasks_share_the_loop() -> None:
    async def main() -> list[int]:
        passes = Passes()
        share = LoopShare(steps=4)
        log: list[tuple[int, int]] = []
        fired: list[int] = []
        tasks = [asyncio.create_task(_bulk(share, passes, name, 20, log)) for name in range(100)]
        await asyncio.sleep(0)
        for _ in range(5):
            due = len(log)
            await asyncio.sleep(0)  # a wake-up that is due at once
            fired.append(len(log) - due)
        await asyncio.gather(*tasks)
        passes.stop()
        return fired

    steps_before_wake = asyncio.run(main())
    # a few passes of at most 4 + 100/4 steps each, not the 100 tasks' 2000 steps
    assert max(steps_before_wake) <= 3 * (2 * 4 + 100 // MAX_WAIT_PASSES)


def test_with_many_tasks_waiting_each_still_goes_on_every_few_passes() -> None:
    async def main() -> list[tuple[int, int]]:
        passes = Passes()
        share = LoopShare(steps=2)  # far fewer turns per pass than tasks
        log: list[tuple[int, int]] = []
        await asyncio.gather(*(_bulk(share, passes, name, 10, log) for name in range(200)))
        passes.stop()
        return log

    log = asyncio.run(main())
    by_task: dict[int, list[int]] = {}
    for n, name in log:
        by_task.setdefault(name, []).append(n)
    waits = sorted(b - a for steps in by_task.values() for a, b in zip(steps, steps[1:]))
    # a sixteenth of those waiting go on per pass: every MAX_WAIT_PASSES passes while all keep coming back,
    # a few more as the queue drains at the end; at 2 per pass it would be 100 passes
    assert waits[len(waits) // 2] <= MAX_WAIT_PASSES and waits[-1] <= 3 * MAX_WAIT_PASSES


def test_a_lone_task_does_a_pass_worth_of_steps_without_waiting() -> None:
    async def main() -> int:
        passes = Passes()
        share = LoopShare(steps=8)
        log: list[tuple[int, int]] = []
        await _bulk(share, passes, 0, 80, log)
        passes.stop()
        return len({n for n, _ in log})

    assert asyncio.run(main()) <= 80 // 8 + 2  # about ten passes for 80 steps, not 80


def test_a_cancelled_waiter_gives_up_its_turn_and_the_others_go_on() -> None:
    async def main() -> tuple[int, int]:
        passes = Passes()
        share = LoopShare(steps=1)
        log: list[tuple[int, int]] = []
        tasks = [asyncio.create_task(_bulk(share, passes, name, 5, log)) for name in range(4)]
        await asyncio.sleep(0)
        tasks[1].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        passes.stop()
        return sum(isinstance(r, asyncio.CancelledError) for r in results), len([1 for _n, name in log if name != 1])

    cancelled, others = asyncio.run(main())
    assert cancelled == 1 and others == 15


def test_one_share_per_loop_and_closed_loops_let_go() -> None:
    async def twice() -> bool:
        return loop_share() is loop_share()

    assert asyncio.run(twice())
    first = asyncio.run(_share_of_loop())
    second = asyncio.run(_share_of_loop())
    assert first is not second
    assert all(not loop.is_closed() for loop in share_module._shares)


async def _share_of_loop() -> LoopShare:
    return loop_share()


def test_a_slice_lets_a_task_make_steps_without_asking_until_it_is_over() -> None:
    async def main() -> tuple[int, int]:
        share = LoopShare(steps=1)
        quick, spent = Slices(share, slice_s=3600.0), Slices(share, slice_s=0.0)
        await share.turn()  # this pass's one turn is taken: the next ask waits
        waits_before = share.waiting
        for _ in range(50):
            await quick.next()  # one wait for the turn, then the slice lasts
        asked = [asyncio.ensure_future(spent.next()) for _ in range(3)]
        await asyncio.sleep(0)
        waiting = share.waiting
        await asyncio.gather(*asked)
        return waits_before, waiting

    waits_before, waiting = asyncio.run(main())
    assert waits_before == 0 and waiting >= 2  # a spent slice asks the share again; a lasting one never did


def test_a_share_must_allow_a_step() -> None:
    with pytest.raises(ValueError):
        LoopShare(steps=0)


def test_a_task_told_to_go_now_leaves_the_queue_in_the_next_pass_and_uses_no_turn() -> None:
    async def main() -> tuple[int, int]:
        passes = Passes()
        share = LoopShare(steps=1)
        log: list[tuple[int, int]] = []
        crowd = [asyncio.create_task(_bulk(share, passes, name, 30, log)) for name in range(40)]
        await asyncio.sleep(0)
        urgent, patient = Slices(share, slice_s=0.0), Slices(share, slice_s=0.0)
        gone: dict[str, int] = {}

        async def wait(name: str, slices: Slices) -> None:
            await slices.next()
            gone[name] = passes.n

        waiters = [asyncio.create_task(wait("urgent", urgent)), asyncio.create_task(wait("patient", patient))]
        await asyncio.sleep(0)
        told_at = passes.n
        urgent.go_now()
        urgent.go_now()  # twice is once
        await asyncio.gather(*waiters, *crowd)
        passes.stop()
        return gone["urgent"] - told_at, gone["patient"] - told_at

    urgent, patient = asyncio.run(main())
    assert urgent <= 2  # its wake-up, then its step
    assert patient > 5  # behind forty tasks, three of which go on per pass


def test_go_now_does_nothing_while_the_task_is_not_waiting() -> None:
    async def main() -> int:
        share = LoopShare(steps=1)
        lone = Slices(share, slice_s=0.0)
        lone.go_now()  # not waiting: nothing to end
        await lone.next()  # the pass's one turn
        return share.waiting

    assert asyncio.run(main()) == 0


def test_a_turn_let_go_early_is_skipped_and_the_next_waiter_has_it() -> None:
    async def main() -> tuple[bool, int]:
        share = LoopShare(steps=1)
        assert share.ticket() is None  # this pass's one turn
        early, next_one = share.ticket(), share.ticket()
        assert early is not None and next_one is not None
        early.set_result(None)  # its holder went on without it
        await asyncio.sleep(0)  # the next pass: one turn
        return next_one.done(), share.waiting

    released, waiting = asyncio.run(main())
    assert released and waiting == 0
