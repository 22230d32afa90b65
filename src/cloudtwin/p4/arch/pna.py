"""PNA on the interpreter core, for programs that read `pna.p4` itself.

A packet runs the main parser, the main control and the main deparser, as with the
built-in PNA-like declarations; on top of that this module gives the core what pna.p4
declares:

- `is_net_port(p)` (port 0 is the network), `is_host_port(p)`, `SelectByDirection(c, a, b)`;
  `istd.recirculated`, `istd.timestamp` (the packet's capture time in ns);
- add-on-miss tables (`add_on_miss = true`, exact keys only): `add_entry` /
  `add_entry_if` in the table's default action add an entry keyed by the packet's own key
  values; entries added so expire by their expire-time profile (profile p: `p` seconds
  unless `profiles_ns` says otherwise; profile 0 at once), measured on packet timestamps:
  a packet at or after an entry's expiry misses it (`set_entry_expire_time`,
  `restart_expire_timer`, `update_expire_info`, `set_entry_expire_time_if` in a hit action
  move it). Entries the control plane installs never expire;
- batches run in rounds so that a batch gives what one packet at a time gives: a round
  runs the rows, then replays the table changes it asked for in packet order; at the first
  row whose lookup would have come out otherwise, every counter and state is put back,
  the rows before it run again, and the next round starts at that row;
- `DirectCounter` (per entry of the table naming it in `pna_direct_counter`; a miss counts
  the default entry, reported as cell -1), `DirectMeter` (no control plane configures one
  yet: every packet is GREEN), `Register` (programs with one run a packet at a time),
  `Hash` (CRC16 as bmv2's crc16, CRC32, ONES_COMPLEMENT16, IDENTITY), `InternetChecksum`;
- `mirror_packet(slot, session)`: the last call per slot (0..3) wins; copies are counted
  per session (`mirror_copies`), none is written out (no session is configured with a port);
- `recirc_packet()` (the extern the IPsec example declares): a forwarding decision like
  `send_to_port` (the last one wins); the deparsed packet runs again with
  `istd.recirculated` true, after the batch's pass; more than MAX_RECIRCULATIONS passes
  is a recirculation loop, refused naming the call;
- the IPsec example's `crypto_accelerator` as a null cipher: its settings are accepted,
  the bytes stay as they are and `get_results()` is `SUCCESS`.

The externs are compiled in `pna_externs` (`PnaExterns`, which holds the state above);
here is what runs a batch over them (`PnaRuntime`: rounds, the replay of table changes,
recirculation) and what reads the control plane's settings from an entries document.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from cloudtwin.errors import P4Error
from cloudtwin.p4.arch.pna_externs import (
    DEFAULT_ENTRY,
    MAX_RECIRCULATIONS,
    MIRROR_SLOTS,
    NET_PORT,
    RECIRCULATE,
    Intent,
    PnaExterns,
)
from cloudtwin.p4.batch import BatchResult, PacketBatch
from cloudtwin.p4.cells import SparseCells
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.depth import copies_packets
from cloudtwin.p4.tables import TableEntry

__all__ = ["MAX_RECIRCULATIONS", "MIRROR_SLOTS", "NET_PORT", "PnaRuntime", "run_entries"]


def _rows(batch: PacketBatch, start: int, stop: int) -> PacketBatch:
    part = slice(start, stop)
    return PacketBatch(
        batch.data[part],
        batch.length[part],
        batch.direction[part],
        batch.input_port[part],
        batch.timestamp_ns[part],
    )


def _concat(parts: list[BatchResult]) -> BatchResult:
    if len(parts) == 1:
        return parts[0]
    width = max(p.data.shape[1] for p in parts)
    data = np.concatenate([np.pad(p.data, ((0, 0), (0, width - p.data.shape[1]))) for p in parts])
    return BatchResult(
        data,
        np.concatenate([p.length for p in parts]),
        np.concatenate([p.out_port for p in parts]),
        np.concatenate([p.dropped for p in parts]),
        np.concatenate([p.parser_error for p in parts]),
    )


def _gather(n: int, outputs: list[tuple[np.ndarray, BatchResult, np.ndarray]]) -> BatchResult:
    """Each original packet's final pass, back in its row."""
    if len(outputs) == 1:
        return outputs[0][1]
    width = max(r.data.shape[1] for _, r, _ in outputs)
    data = np.zeros((n, width), dtype=np.uint8)
    length = np.zeros(n, dtype=np.int64)
    port = np.full(n, -1, dtype=np.int64)
    dropped = np.ones(n, dtype=bool)
    error = np.zeros(n, dtype=bool)
    for rows, result, kept in outputs:
        data[rows, : result.data.shape[1]] = result.data[kept]
        length[rows] = result.length[kept]
        port[rows] = result.out_port[kept]
        dropped[rows] = result.dropped[kept]
        error[rows] = result.parser_error[kept]
    return BatchResult(data, length, port, dropped, error)


def run_entries(
    datapath: Datapath, entries: Any, packets: list[tuple[int, bytes, int]]
) -> list[tuple[int, bytes] | None]:
    """Install an entries document as `nic run --entries` does, then run `packets` (input
    port, bytes, timestamp in ns) as one batch: each packet's (port, bytes), None when dropped."""
    from cloudtwin.p4.run import install

    install(datapath, entries)
    if not packets:
        return []
    ports = np.array([p for p, _, _ in packets], dtype=np.uint64)
    times = np.array([t for _, _, t in packets], dtype=np.uint64)
    batch = PacketBatch.from_packets(
        [b for _, b, _ in packets], (ports != NET_PORT).astype(np.uint64), ports, times
    )
    result = datapath.process(batch)
    return [
        None if result.dropped[i] else (int(result.out_port[i]), result.packet(i) or b"")
        for i in range(len(batch))
    ]


class PnaRuntime(PnaExterns):
    """The PNA state of one datapath: add-on-miss tables, direct counters, mirror counts;
    `process` runs a batch (rounds, recirculation)."""

    # control plane -----------------------------------------------------------------
    def settings(self, raw: Any) -> Any:
        """The `pna:` section of an entries document, checked (NicError naming the key):
        `expire_time_profiles: {profile: duration}` and `default_actions: {table: {action,
        params}}` (a table whose default action is not `const`)."""
        from cloudtwin.errors import NicError, ScenarioError
        from cloudtwin.p4.entries import parse_value
        from cloudtwin.scenario.units import parse_time

        if raw is None:
            return {}, {}, []
        if not isinstance(raw, dict) or set(raw) - {
            "expire_time_profiles",
            "default_actions",
            "direct_meters",
        }:
            raise NicError(
                "pna: a mapping with `expire_time_profiles`, `default_actions` and/or `direct_meters`"
            )
        profiles: dict[int, int] = {}
        for key, value in (raw.get("expire_time_profiles") or {}).items():
            where = f"pna.expire_time_profiles.{key}"
            if not isinstance(key, int) or isinstance(key, bool) or not 0 <= key <= 255:
                raise NicError(f"{where}: a profile is a number 0..255")
            try:
                seconds = parse_time(value)
            except (ScenarioError, ValueError, TypeError) as err:
                raise NicError(f"{where}: {err}") from err
            if not 0 <= seconds <= 10**9:
                raise NicError(f"{where}: a duration of 0 s to 10^9 s")
            profiles[key] = round(seconds * 1e9)
        defaults: dict[str, tuple[str, tuple[int, ...]]] = {}
        for table, given in (raw.get("default_actions") or {}).items():
            where = f"pna.default_actions.{table}"
            state = self.dp.tables.get(str(table))
            if state is None:
                raise NicError(f"{where}: the program has no table {table!r}")
            if state.table.default_is_const:
                raise NicError(f"{where}: the table's default action is const")
            if not isinstance(given, dict) or set(given) - {"action", "params"} or "action" not in given:
                raise NicError(f"{where}: a mapping with action and params")
            action = str(given["action"])
            if action not in state.table.actions and action != "NoAction":
                raise NicError(f"{where}.action: {action!r} is not an action of {table}")
            declared = self.dp.action_params(action, self.dp.owners.get(str(table)))
            params = given.get("params") or {}
            if not isinstance(params, dict) or sorted(params) != sorted(p for p, _ in declared):
                names = ", ".join(p for p, _ in declared) or "none"
                raise NicError(f"{where}.params: give exactly the parameters of {action} ({names})")
            values = tuple(parse_value(params[p], w, f"{where}.params.{p}") for p, w in declared)
            defaults[str(table)] = (action, values)
        return profiles, defaults, self.meter_settings(raw.get("direct_meters") or {})

    def meter_settings(self, raw: Any) -> list[tuple[str, int, tuple[float, float, float, float]]]:
        """`direct_meters: {m: [{entry, cir, cburst, pir, pburst}, ...]}`: the rates of the
        cell of entry `entry` (its position in the table's entries; `default` for a miss)."""
        from cloudtwin.errors import NicError, ScenarioError
        from cloudtwin.scenario.units import parse_rate, parse_size

        out = []
        if not isinstance(raw, dict):
            raise NicError("pna.direct_meters: a mapping of DirectMeter name to a list of settings")
        for name, rows in raw.items():
            meter = self.direct_meters.get(str(name))
            if meter is None or not isinstance(rows, list):
                raise NicError(
                    f"pna.direct_meters.{name}: a list of settings of one of the program's DirectMeters"
                )
            for i, row in enumerate(rows):
                where = f"pna.direct_meters.{name}.{i}"
                if not isinstance(row, dict) or set(row) != {"entry", "cir", "cburst", "pir", "pburst"}:
                    raise NicError(f"{where}: give entry, cir, cburst, pir and pburst")
                entry = row["entry"]
                if entry == "default":
                    entry = DEFAULT_ENTRY
                elif not isinstance(entry, int) or isinstance(entry, bool) or not 0 <= entry < DEFAULT_ENTRY:
                    raise NicError(f"{where}.entry: an entry's position (from 0) or `default`")
                try:
                    if meter.unit == "packets":
                        rates = (
                            float(row["cir"]),
                            float(row["cburst"]),
                            float(row["pir"]),
                            float(row["pburst"]),
                        )
                    else:
                        rates = (
                            parse_rate(row["cir"]) / 8, float(parse_size(row["cburst"])),
                            parse_rate(row["pir"]) / 8, float(parse_size(row["pburst"])),
                        )  # fmt: skip
                except (ValueError, TypeError, ScenarioError) as err:
                    raise NicError(f"{where}: {err}") from err
                if not all(0 <= r < float("inf") for r in rates) or rates[2] < rates[0]:
                    raise NicError(f"{where}: finite rates, the peak rate at least the committed rate")
                out.append((str(name), int(entry), rates))
        return out

    def apply(self, settings: Any) -> None:
        """Install checked `settings`: expire-time profiles, default actions, direct meters."""
        profiles, defaults, meters = settings
        self.profiles_ns.update(profiles)
        for name, entry, (cir, cburst, pir, pburst) in meters:
            self.direct_meters[name].configure(entry, cir, cburst, pir, pburst)
        for table, default in defaults.items():
            self.dp.tables[table].default = default

    # running -----------------------------------------------------------------------
    def counter_totals(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Each DirectCounter's entries (-1: the default entry): (packets, bytes); with
        `mirror_packet` (copies per session) and `recirc_packet` (passes, as cell 0) when
        a packet asked for them, so that `nic run` reports them with the counters."""
        out = {
            name: {e: (p, b) for e, (p, b) in sorted(cells.items())}
            for name, cells in self.direct_counts.items()
        }
        if self.mirror_copies:
            out["mirror_packet"] = {s: (c, 0) for s, c in sorted(self.mirror_copies.items())}
        if self.recirculations:
            out["recirc_packet"] = {0: (self.recirculations, 0)}
        return out

    def process(self, batch: PacketBatch) -> BatchResult:
        """Every packet of `batch` through the pipeline, recirculated ones again after each
        pass; P4Error naming the call when one recirculates more than MAX_RECIRCULATIONS times."""
        n = len(batch)
        if n and batch.data.shape[1] < int(batch.length.max()) and copies_packets(self.dp.program):
            # recirculation and mirroring need whole packets (nic run batches such programs
            # whole: depth.parse_depth bounds no program that calls them)
            raise P4Error(
                f"{self.dp.program.source}: a PNA program that recirculates or mirrors "
                "needs whole packets, not their heads"
            )
        origin = np.arange(n)
        outputs: list[tuple[np.ndarray, BatchResult, np.ndarray]] = []
        current = batch
        for passes in range(MAX_RECIRCULATIONS + 1):
            result = self.rounds(current, passes > 0)
            again = ~result.dropped & (result.out_port == RECIRCULATE)
            outputs.append((origin[~again], result, ~again))
            if not again.any():
                break
            if passes == MAX_RECIRCULATIONS:
                raise P4Error(
                    f"{self.recirculate_site}: a packet recirculated more than {MAX_RECIRCULATIONS} times "
                    "(a recirculation loop)"
                )
            self.recirculations += int(again.sum())
            current = PacketBatch.of_rows(
                result.data[again],
                result.length[again],
                current.direction[again],
                current.input_port[again],
                current.timestamp_ns[again],
            )
            origin = origin[again]
        return _gather(n, outputs)

    def rounds(self, batch: PacketBatch, recirculated: bool) -> BatchResult:
        """One pass of `batch`, in rounds when entries change in the data plane (see above)."""
        n = len(batch)
        if (not self.aom and not self.dp.registers) or n == 0:
            return self.one_pass(batch, recirculated, 0)
        parts: list[BatchResult] = []
        start, window = 0, (1 if self.dp.registers else n)
        while start < n:
            stop = min(n, start + window)
            saved = self.snapshot()
            result = self.one_pass(_rows(batch, start, stop), recirculated, start)
            cut = self.first_conflict()
            if cut is not None:
                self.restore(saved)
                stop = cut
                result = self.one_pass(_rows(batch, start, stop), recirculated, start)
                window = max(16, 2 * (stop - start))
            self.commit()
            parts.append(result)
            start = stop
        return _concat(parts)

    def one_pass(self, batch: PacketBatch, recirculated: bool, offset: int) -> BatchResult:
        dp = self.dp
        self.offset, self.intents, self.lookups, self.add_rows = offset, [], [], {}
        ctx = dp.context(batch)
        ctx.values["istd.timestamp"] = ctx.values["istd.timestamp_ns"]
        ctx.values["istd.recirculated"] = np.full(ctx.n, int(recirculated), dtype=np.uint64)
        alive = dp.parse_and_control(ctx)
        for k in range(MIRROR_SLOTS):
            sessions = ctx.values.get(f"$mirror.{k}")
            if sessions is None:
                continue
            chosen = sessions[alive & (sessions > 0)].astype(np.int64) - 1
            for session, count in zip(*np.unique(chosen, return_counts=True), strict=True):
                self.mirror_copies[int(session)] = self.mirror_copies.get(int(session), 0) + int(count)
        dropped = ctx.drop | ctx.parser_error
        if self.trace:
            every, sizes = dp.deparse(ctx, alive)
            self.emitted.extend(every[i, : sizes[i]].tobytes() if alive[i] else None for i in range(ctx.n))
        data, length = dp.deparse(ctx, ~dropped)
        return BatchResult(data, length, np.where(dropped, -1, ctx.port), dropped, ctx.parser_error)

    def first_conflict(self) -> int | None:
        """The first row whose lookup of an add-on-miss table would have come out otherwise
        had the rows before it in the round changed the table first; None when none."""
        intents = self.intents or []
        cut = self.capacity_cut()
        if not intents:
            return cut
        touched: dict[str, set[tuple[int, ...]]] = {}
        for asked in intents:
            touched.setdefault(asked.table, set()).add(asked.key)
        events: list[tuple[int, int, str, Any]] = [(i.row, i.seq, "change", i) for i in intents]
        for table, rows, keys, index, stamps in self.lookups:
            keys_of = touched.get(table)
            if not keys_of:
                continue
            for row, key, found, stamp in zip(
                rows.tolist(),
                zip(*(k.tolist() for k in keys), strict=True),
                index.tolist(),
                stamps.tolist(),
                strict=True,
            ):
                if key in keys_of:
                    events.append((row, -1, "look", (table, key, found >= 0, int(stamp))))
        events.sort(key=lambda e: (e[0], e[1]))
        sim: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for row, _, kind, payload in events:
            if cut is not None and row >= cut:
                return cut
            if kind == "look":
                table, key, hit, stamp = payload
                entry = self.sim_entry(sim, table, key)
                if (entry[0] > stamp) != hit:
                    return int(row)
                continue
            intent: Intent = payload
            entry = self.sim_entry(sim, intent.table, intent.key)
            added = intent.kind == "add" and entry[0] <= intent.time_ns
            if added or intent.kind == "expire":
                entry[0], entry[1] = intent.time_ns + self.profile_ns(intent.profile), intent.profile
            elif intent.kind == "restart":
                entry[0] = intent.time_ns + self.profile_ns(entry[1])
        return cut

    def capacity_cut(self) -> int | None:
        """Where a round must end so that add_entry's `table full` answers are exact: at a
        table's second add_entry of the round when the program adds from two places (the rows
        of one call come before those of the next) or when timers moved in the round could
        free or take a place of a table that is nearly full."""
        cut = None
        for table, tried in self.add_rows.items():
            rows = [row for row, _ in tried]
            if len(rows) < 2:
                continue
            second = sorted(rows)[1]
            if rows != sorted(rows):  # two add_entry calls in the program: rows out of order
                cut = second if cut is None else min(cut, second)
                continue
            timers = [i for i in self.intents or [] if i.table == table and i.kind != "add"]
            if not timers:
                continue
            earliest = min(i.time_ns for i in self.intents or [] if i.table == table)
            live = int(self.live_entries(table, np.array([earliest], dtype=np.int64))[0])
            if live + len(rows) + len(timers) >= self.aom[table].state.table.size:
                cut = second if cut is None else min(cut, second)
        return cut

    def sim_entry(
        self, sim: dict[tuple[str, tuple[int, ...]], list[int]], table: str, key: tuple[int, ...]
    ) -> list[int]:
        entry = sim.get((table, key))
        if entry is None:
            aom = self.aom[table]
            aom.sync()
            at = aom.index.get(key)
            entry = [aom.expire_at[at], aom.profile[at]] if at is not None else [-1, 0]
            sim[(table, key)] = entry
        return entry

    def commit(self) -> None:
        """The round's table changes, in packet order."""
        intents = sorted(self.intents or [], key=lambda i: (i.row, i.seq))
        self.intents, self.lookups = None, []
        changed: set[str] = set()
        for intent in intents:
            aom = self.aom[intent.table]
            aom.sync()
            at = aom.index.get(intent.key)
            if intent.kind == "add":
                if at is not None and aom.expire_at[at] > intent.time_ns:
                    continue  # live already (a later row of the same round: replayed)
                entry = TableEntry(intent.key, intent.action, intent.params)
                if at is None:
                    aom.state.entries.append(entry)
                    aom.expire_at.append(0)
                    aom.profile.append(0)
                    at = aom.index[intent.key] = len(aom.state.entries) - 1
                else:
                    aom.state.entries[at] = entry
                aom.expire_at[at] = intent.time_ns + self.profile_ns(intent.profile)
                aom.profile[at] = intent.profile
                changed.add(intent.table)
            elif at is not None and intent.kind == "expire":
                aom.expire_at[at] = intent.time_ns + self.profile_ns(intent.profile)
                aom.profile[at] = intent.profile
            elif at is not None:
                aom.expire_at[at] = intent.time_ns + self.profile_ns(aom.profile[at])
        for table in changed:
            state = self.aom[table].state
            hits = state.hits
            state.invalidate()
            state.hits[: hits.size] = hits
            self.aom[table].synced = id(state.entries)
            if len(state.entries) >= 2 * state.table.size:
                self.compact(table, max(i.time_ns for i in intents))

    def compact(self, table: str, now_ns: int) -> None:
        """Drop the entries of `table` expired at `now_ns` (AUTO_DELETE), so that a table whose
        entries come and go holds at most its size of live ones and as many expired."""
        aom = self.aom[table]
        state = aom.state
        keep = [i for i, t in enumerate(aom.expire_at) if t > now_ns]
        hits = state.hits
        state.entries[:] = [state.entries[i] for i in keep]
        aom.expire_at = [aom.expire_at[i] for i in keep]
        aom.profile = [aom.profile[i] for i in keep]
        aom.index = {tuple(int(m) for m in state.entries[j].match): j for j in range(len(keep))}  # type: ignore[arg-type]
        state.invalidate()
        state.hits[:] = hits[keep] if keep else hits[:0]
        moved = {old: new for new, old in enumerate(keep)}
        for counter, owner in self.direct.items():
            if owner == table and counter in self.direct_counts:
                cells = self.direct_counts[counter]
                kept = {
                    moved.get(e, e) if e < 0 else moved[e]: v for e, v in cells.items() if e < 0 or e in moved
                }
                cells.clear()
                cells.update(kept)

    def snapshot(self) -> Any:
        dp = self.dp
        return copy.deepcopy(
            (
                dp.counters,
                {n: s.hits for n, s in dp.tables.items()},
                dp.action_runs,
                dp.state_visits,
                {n: m.tokens for n, m in (*dp.meters.items(), *self.direct_meters.items())},
                self.direct_counts,
                self.mirror_copies,
                len(self.emitted),
            )
        )

    def restore(self, saved: Any) -> None:
        """Counters and states as `snapshot` saw them (in place: compiled code holds them)."""
        counters, hits, runs, visits, tokens, direct, mirrors, emitted = saved
        del self.emitted[emitted:]
        for name, (packets, octets) in self.dp.counters.items():
            for now, before in zip((packets, octets), counters[name], strict=True):
                if isinstance(now, SparseCells):
                    now.totals = before.totals
                else:
                    now[...] = before
        for name, state in self.dp.tables.items():
            state.hits = hits[name]
        for live, old in ((self.dp.action_runs, runs), (self.dp.state_visits, visits)):
            live.clear()
            live.update(old)
        for name, meter in (*self.dp.meters.items(), *self.direct_meters.items()):
            meter.tokens.clear()
            meter.tokens.update(tokens[name])
        for name, cells in self.direct_counts.items():
            cells.clear()
            cells.update(direct[name])
        self.mirror_copies.clear()
        self.mirror_copies.update(mirrors)
