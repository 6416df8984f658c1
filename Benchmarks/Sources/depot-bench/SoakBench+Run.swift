import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

// MARK: - The run

extension SoakBench {
    struct Minute {
        var rss: Double
        var heap: Double?
        var mallocHolds: Double?
        var sqlite: Double?
        var threads: Int?
        var transfers: Int
        var succeeded = 0, cancelled = 0, failed = 0, changeSets = 0, commits = 0, commitTime = 0
        var stall: Duration
        var qualities: [ConnectionQuality]
    }

    /// Runs the soak; returns whether every check passed.
    @MainActor
    static func run(duration: Duration, seed: UInt64) async throws -> Bool {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "soak.sqlite").path, migrator: migrator)
        let entries = try JSONDecoder().decode([Entry].self, from: feedBody)
        try await store.write { db in
            for feed in 0..<feedCount {
                let operation = FetchFeed(feed: feed, serial: 0)
                _ = try operation.write(operation.items(entries), to: db)
            }
        }
        let link = Link()
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://sim.test")!, transport: link)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let counters = Counters()
        let soak = Soak(controller: controller, store: store, counters: counters, seed: seed)
        for number in 0..<observerCount { try soak.makeObserver(number) }
        say("soak: \(duration), seed \(seed): \(queuedTarget) operations kept queued, \(observerCount) results controllers over \(tableCount) tables, \(cancelsPerTick * 10) cancels/s, a writer committing 4 times/s")
        say("link: NetworkSimulator on ContinuousClock, each minute 8 Mbit/s 25 ms (12 s) → 1.5 Mbit/s 80 ms (13 s) → 100 kbit/s 300 ms (25 s) → offline (10 s)")
        say("| minute | RSS MB | heap in use MB | malloc holds MB | of which SQLite MB | transfers | completed | cancelled | failed | change sets | writer commits | commit mean / longest | longest stall | controller's quality |")
        say("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")

        // A frame timer on the main actor: how late each 16 ms tick comes is a stall.
        let frames = Task { @MainActor in
            let clock = ContinuousClock()
            var last = clock.now
            while !counters.finished.load(ordering: .relaxed) {
                try? await clock.sleep(for: framePeriod)
                let now = clock.now
                counters.longestStall.raise(to: counters.nanoseconds(at: now) - counters.nanoseconds(at: last) - nanoseconds(framePeriod))
                counters.heartbeat.store(counters.nanoseconds(at: now), ordering: .relaxed)
                last = now
            }
        }
        let chaos = Task { @MainActor in
            var tick = 0
            while !counters.isStopping {
                try? await Task.sleep(for: .milliseconds(100))
                guard !counters.isStopping else { break }
                soak.cancelSome()
                soak.topUp()
                tick += 1
                if tick % 10 == 0 {
                    do { try soak.replaceObserver() } catch { counters.observationErrors.add(1, ordering: .relaxed) }
                    counters.lingeringControllers.raise(to: soak.lingering(olderThan: .seconds(10)))
                }
            }
        }
        let writer = Task.detached {
            var random = SeededGenerator(seed: seed &+ 1)
            while !counters.isStopping {
                try? await Task.sleep(for: .milliseconds(250))
                let table = Int.random(in: 0..<tableCount, using: &random)
                let ids = (0..<3).map { _ in (table + tableCount * Int.random(in: 0..<(feedCount / tableCount), using: &random)) * 32 + Int.random(in: 0..<18, using: &random) }
                do {
                    let start = ContinuousClock.now
                    try await store.write { db in
                        for id in ids { try db.execute(sql: "UPDATE item\(table) SET likes = likes + 1 WHERE id = ?", arguments: [id]) }
                    }
                    let time = nanoseconds(start.duration(to: .now))
                    counters.commitTime.add(time, ordering: .relaxed)
                    counters.longestCommit.raise(to: time)
                    counters.commits.add(1, ordering: .relaxed)
                } catch {
                    counters.writerErrors.add(1, ordering: .relaxed)
                }
            }
        }

        _ = link.rotate()  // the link's cycle starts with the clock
        // A thread of its own, so that it also sees a cooperative pool that no longer runs anything.
        counters.heartbeat.store(counters.nanoseconds(at: .now), ordering: .relaxed)
        counters.monitorBeat.store(counters.nanoseconds(at: .now), ordering: .relaxed)
        Thread { watchdog(controller: controller, link: link, counters: counters) }.start()
        let watching = Task.detached { await watch(duration: duration, controller: controller, link: link, counters: counters) }
        soak.topUp()
        let minutes = await watching.value

        // Stop, shut down, and wait for the completions that shutdown resolved.
        counters.stopping.store(true, ordering: .relaxed)
        await chaos.value
        await writer.value
        let shutdownStart = ContinuousClock.now
        let report = await controller.shutdown(grace: .seconds(5))
        let shutdownTime = shutdownStart.duration(to: .now)
        let settleDeadline = ContinuousClock.now.advanced(by: .seconds(30))
        while counters.outstanding > 0, ContinuousClock.now < settleDeadline { try? await Task.sleep(for: .milliseconds(50)) }
        counters.finished.store(true, ordering: .relaxed)
        await frames.value
        let alive = await soak.releaseAll(patience: .seconds(10))

        return verdict(duration: duration, minutes: minutes, counters: counters, report: report, shutdownTime: shutdownTime, open: soak.live, aliveControllers: alive)
    }

    /// Each second: the controller's quality and the stalls; each minute: a
    /// row, and a fresh link cycle.
    static func watch(duration: Duration, controller: NetworkController, link: Link, counters: Counters) async -> [Minute] {
        let clock = ContinuousClock()
        let begin = clock.now
        let seconds = max(1, Int(duration.components.seconds))
        var minutes: [Minute] = []
        var last = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [])
        var current = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [controller.quality])
        for second in 1...seconds {
            try? await clock.sleep(until: begin.advanced(by: .seconds(second)))
            counters.monitorBeat.store(counters.nanoseconds(at: clock.now), ordering: .relaxed)
            let silent = counters.nanoseconds(at: clock.now) - counters.heartbeat.load(ordering: .relaxed)
            let stall = max(counters.longestStall.exchange(0, ordering: .relaxed), silent - nanoseconds(framePeriod))
            current.stall = max(current.stall, .nanoseconds(stall))
            let quality = controller.quality
            if quality != current.qualities.last { current.qualities.append(quality) }
            guard second % 60 == 0 || second == seconds else { continue }

            current.rss = residentMegabytes()
            let malloc = mallocMegabytes()
            current.heap = malloc?.inUse
            current.mallocHolds = malloc?.system
            current.sqlite = sqliteMegabytes()
            current.threads = threadCount()
            current.transfers = second % 60 == 0 ? link.rotate() : link.simulator.records.count
            current.succeeded = counters.succeeded.load(ordering: .relaxed)
            current.cancelled = counters.cancelled.load(ordering: .relaxed)
            current.failed = counters.failed.load(ordering: .relaxed)
            current.changeSets = counters.changeSets.load(ordering: .relaxed)
            current.commits = counters.commits.load(ordering: .relaxed)
            current.commitTime = counters.commitTime.load(ordering: .relaxed)
            let commits = max(1, current.commits - last.commits)
            let row = [
                String(format: "%.1f", Double(second) / 60), String(format: "%.1f", current.rss), current.heap.map { String(format: "%.1f", $0) } ?? "–",
                current.mallocHolds.map { String(format: "%.1f", $0) } ?? "–",
                current.sqlite.map { String(format: "%.1f", $0) } ?? "–", "\(current.transfers)",
                "\(current.succeeded - last.succeeded)", "\(current.cancelled - last.cancelled)", "\(current.failed - last.failed)",
                "\(current.changeSets - last.changeSets)", "\(current.commits - last.commits)",
                String(format: "%.1f / %.1f ms", Double(current.commitTime - last.commitTime) / Double(commits) / 1e6, Double(counters.longestCommit.exchange(0, ordering: .relaxed)) / 1e6),
                String(format: "%.1f ms", Double(nanoseconds(current.stall)) / 1e6),
                current.qualities.map(\.description).joined(separator: " → "),
            ]
            say("| " + row.joined(separator: " | ") + " |")
            minutes.append(current)
            last = current
            current = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [quality])
        }
        return minutes
    }
}

// MARK: - Verdict

extension SoakBench {
    static func verdict(duration: Duration, minutes: [Minute], counters: Counters, report: ShutdownReport, shutdownTime: Duration, open: [Ticket], aliveControllers: Int) -> Bool {
        var passed = true
        let enqueued = counters.enqueued.load(ordering: .relaxed)
        let (succeeded, cancelled, failed) = (counters.succeeded.load(ordering: .relaxed), counters.cancelled.load(ordering: .relaxed), counters.failed.load(ordering: .relaxed))
        let failures = counters.failures.withLock { $0 }.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        say("")
        say("operations: \(enqueued) enqueued, \(succeeded) completed, \(cancelled) cancelled, \(failed) failed (\(failures)); \(counters.cancelRequests.load(ordering: .relaxed)) cancel() calls")
        say("results controllers: \(counters.changeSets.load(ordering: .relaxed)) change sets delivered, \(counters.replacedObservers.load(ordering: .relaxed)) controllers replaced, \(counters.observationErrors.load(ordering: .relaxed)) observation errors")
        say("writer: \(counters.commits.load(ordering: .relaxed)) commits, \(counters.writerErrors.load(ordering: .relaxed)) errors")
        say("shutdown: \(report), returned in \(shutdownTime)")
        let longest = minutes.map(\.stall).max() ?? .zero
        say("longest main-actor stall: \(longest) (beyond the \(framePeriod) frame)")
        say("threads at each minute's end: \(minutes.map { $0.threads.map(String.init) ?? "–" }.joined(separator: ", "))")

        let lost = enqueued - (succeeded + cancelled + failed)
        if lost == 0 {
            say("completions: every one accounted for: \(enqueued) enqueued = \(succeeded) completed + \(cancelled) cancelled + \(failed) failed; \(counters.duplicates.load(ordering: .relaxed)) twice")
        } else {
            say("LOST \(lost) completions: \(enqueued) enqueued, \(succeeded + cancelled + failed) completed; open: \(open.prefix(10).map { "\($0) finished=\($0.isFinished)" }.joined(separator: ", "))")
            passed = false
        }
        let lingering = counters.lingeringControllers.load(ordering: .relaxed)
        say("released results controllers: \(aliveControllers) still alive 10 s after the end; at most \(lingering) alive 10 s after their release during the run")
        if aliveControllers > 0 || lingering > 0 { passed = false }
        let duplicates = counters.duplicates.load(ordering: .relaxed)
        if duplicates > 0 {
            say("DUPLICATE completions: \(duplicates)")
            passed = false
        }
        if minutes.count >= 2 {
            let (second, last) = (minutes[1].rss, minutes[minutes.count - 1].rss)
            let change = (last - second) / second * 100
            let flat = abs(change) <= 10
            say(String(format: "RSS flat: last minute %.1f MB within %.1f%% of the second minute (%.1f MB; target ≤ 10%%): %@", last, abs(change), second, flat ? "PASS" : "FAIL"))
            passed = passed && flat
            if let secondHeap = minutes[1].heap, let lastHeap = minutes[minutes.count - 1].heap {
                say(String(format: "heap in use (malloc): last minute %.1f MB, %+.1f%% on the second minute (%.1f MB)", lastHeap, (lastHeap - secondHeap) / secondHeap * 100, secondHeap))
                if let secondSQLite = minutes[1].sqlite, let lastSQLite = minutes[minutes.count - 1].sqlite {
                    say(String(format: "of which SQLite: %.1f MB, then %.1f MB", secondSQLite, lastSQLite))
                }
            }
        } else {
            say("RSS flat: needs at least two minutes")
        }
        say("no deadlock (watchdog: \(watchdogSeconds) s)")
        say(passed ? "PASS" : "FAIL")
        let problems = [(lost, "lost"), (duplicates, "doubled"), (aliveControllers + lingering, "not freed")].filter { $0.0 != 0 }
        SummaryRow.print(summary(duration: duration, minutes: minutes, completions: succeeded, problems: problems.map { "\($0.0) \($0.1)" }))
        return passed
    }

    /// BENCHMARKS.md's soak rows, named for `MALLOC_ARENA_MAX` when it is set.
    ///
    /// - Parameter problems: Lost or doubled completions and unfreed controllers, as "3 lost".
    static func summary(duration: Duration, minutes: [Minute], completions: Int, problems: [String]) -> [SummaryRow] {
        let arenas = ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"].map { ", `MALLOC_ARENA_MAX=\($0)`" } ?? ""
        var rows: [SummaryRow] = []
        if minutes.count >= 2 {
            let (second, last) = (minutes[1], minutes[minutes.count - 1])
            let change = (last.rss - second.rss) / second.rss * 100
            rows.append(SummaryRow("soak: RSS, last minute vs second\(arenas)", target: "within 10%", SummaryRow.percent(change), met: abs(change) <= 10))
            if let secondHeap = second.heap, let lastHeap = last.heap {
                rows.append(SummaryRow("soak: malloc heap in use, last minute vs second\(arenas)", String(format: "%@ (%.1f MB)", SummaryRow.percent((lastHeap - secondHeap) / secondHeap * 100), lastHeap)))
            }
        }
        rows.append(SummaryRow("soak: deadlocks; lost or doubled completions; released controllers not freed\(arenas)", target: "none",
                               problems.isEmpty ? "none" : problems.joined(separator: ", "), met: problems.isEmpty))
        // Each minute's mean commit: the counters are running totals.
        let commitMeans = zip(minutes, [Minute(rss: 0, transfers: 0, stall: .zero, qualities: [])] + minutes).map { minute, previous in
            Double(minute.commitTime - previous.commitTime) / Double(max(1, minute.commits - previous.commits)) / 1e6
        }
        let stall = minutes.map(\.stall).max() ?? .zero
        rows.append(SummaryRow("soak: longest main-actor stall; writer's commit mean; threads\(arenas)",
                               String(format: "%.1f ms; %@ ms; %@", stall.seconds * 1e3, SummaryRow.range(commitMeans), SummaryRow.range(minutes.compactMap { $0.threads.map(Double.init) }, digits: 0))))
        let seconds = duration.components.seconds
        let span = seconds % 60 == 0 ? "\(seconds / 60) minute\(seconds == 60 ? "" : "s")" : "\(seconds) seconds"
        rows.append(SummaryRow("soak: completions in \(span)\(arenas)", SummaryRow.grouped(Double(completions))))
        return rows
    }

    /// Once a second until the run is finished: fails the run (exit 1) when the
    /// main actor, or the cooperative pool, has not run for `watchdogSeconds`;
    /// when nothing completed for `watchdogSeconds` of online link with work
    /// outstanding; or when shutdown and its completions take over 120 s.
    static func watchdog(controller: NetworkController, link: Link, counters: Counters) {
        var idleSeconds = 0
        var lastProgress = 0
        var stoppingSince: Int?
        let limit = watchdogSeconds * 1_000_000_000
        func fail(_ message: String) -> Never {
            // The counters first: the diagnosis takes locks a deadlock may hold.
            say("DEADLOCK: \(message); \(counters.enqueued.load(ordering: .relaxed)) enqueued, \(counters.resolved) completed")
            say("  \(diagnosis(controller, link, counters))")
            exit(1)
        }
        while !counters.finished.load(ordering: .relaxed) {
            sleep(1)
            let now = counters.nanoseconds(at: .now)
            let mainActorSilence = now - counters.heartbeat.load(ordering: .relaxed)
            if mainActorSilence > limit { fail("the main actor has not run for \(mainActorSilence / 1_000_000_000) s") }
            let poolSilence = now - counters.monitorBeat.load(ordering: .relaxed)
            if !counters.isStopping, poolSilence > limit { fail("the cooperative pool has not run the monitor for \(poolSilence / 1_000_000_000) s") }
            if counters.isStopping {
                stoppingSince = stoppingSince ?? now
                if let since = stoppingSince, now - since > 120_000_000_000 { fail("shutdown and its completions have not finished after 120 s") }
                continue
            }
            let progress = counters.succeeded.load(ordering: .relaxed) + counters.failed.load(ordering: .relaxed)
            if progress != lastProgress || counters.outstanding == 0 || link.simulator.isOffline {
                idleSeconds = 0
                lastProgress = progress
            } else {
                idleSeconds += 1
            }
            if idleSeconds >= watchdogSeconds {
                fail("no operation has completed for \(idleSeconds) s with the link online and \(counters.outstanding) outstanding")
            }
        }
    }

    static func diagnosis(_ controller: NetworkController, _ link: Link, _ counters: Counters) -> String {
        let simulator = link.simulator
        return "activity \(controller.activity), quality \(controller.quality), link offline \(simulator.isOffline), \(simulator.openTransferCount) open transfers; \(counters.enqueued.load(ordering: .relaxed)) enqueued, \(counters.resolved) completed"
    }

    static func nanoseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1_000_000_000 + Int(duration.components.attoseconds / 1_000_000_000)
    }
}

extension Atomic where Value == Int {
    /// Stores `value` if it is larger than the stored one.
    func raise(to value: Int) {
        var current = load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
