import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB

extension LiveLatencyBench {
    /// The floor's rows: ids far above the server's, so that each sits at the
    /// top of the screen and is told apart from the server's posts.
    static let floorBase = 1_000_000_000

    /// What the follower's floor writes wait for, on the main actor.
    @MainActor
    final class FloorWrites {
        /// Each floor row's id → `CLOCK_MONOTONIC` just before its `store.write`.
        var started: [Int: Int64] = [:]
    }

    /// `depot-bench livefollower BASE`: the app on the other side. It opens a
    /// file-backed `Store`, a `NetworkController` on `AsyncHTTPClientTransport`,
    /// `LiveFeed(LiveTimeline.Feed())` watched, and a `ResultsController` on
    /// the newest 200 posts, prints `ready` once the feed is live, then one
    /// line per row its results deliver, with `CLOCK_MONOTONIC` in ns:
    /// `d ID T` for a server's post, `f START T` for a floor row it wrote
    /// itself (`floorRate` a second, through `store.write`). It ends when its
    /// standard input closes.
    @MainActor
    static func follow(base: URL, floorRate: Int) async throws {
        let folder = try LiveTimeline.temporaryFolder("livefollower")
        // The parent closes the pipe to end the follower: clean up and leave.
        Thread.detachNewThread {
            while !FileHandle.standardInput.availableData.isEmpty {}
            try? FileManager.default.removeItem(at: folder)
            exit(0)
        }
        let store = try Store(path: folder.appending(path: "timeline.sqlite").path, migrator: LiveTimeline.migrator)
        var configuration = NetworkController.Configuration(baseURL: base, transport: AsyncHTTPClientTransport())
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let feed = try LiveFeed(LiveTimeline.Feed(), controller: controller)
        let results = try ResultsController(store: store, request: LiveTimeline.Post.newest(200))
        let floor = FloorWrites()
        let updates = results.updates()
        let delivering = Task { @MainActor in
            for await update in updates {
                let now = LiveTimeline.monotonicNanoseconds()
                guard let changes = update.changes else { continue }
                var lines = ""
                for path in changes.inserted {
                    let id = update.snapshot[path].id
                    if id >= floorBase {
                        if let start = floor.started.removeValue(forKey: id) { lines += "f \(start) \(now)\n" }
                    } else {
                        lines += "d \(id) \(now)\n"
                    }
                }
                if !lines.isEmpty { FileHandle.standardOutput.write(Data(lines.utf8)) }
            }
        }
        defer { delivering.cancel() }
        let watch = feed.watch()
        defer { watch.cancel() }
        for await state in feed.status.updates() where state.live == .live { break }
        FileHandle.standardOutput.write(Data("ready\n".utf8))

        // The floor: the same kind of row, written here, interleaved with the stream's.
        let interval = Duration.nanoseconds(1_000_000_000 / Int64(max(1, floorRate)))
        var due = ContinuousClock.now
        for index in 1... {
            due += interval
            try await Task.sleep(until: due, clock: .continuous)
            let id = floorBase + index
            let post = LiveTimeline.Post(id: id, author: "floor", text: "floor \(index)", avatar: "/avatars/1.png")
            floor.started[id] = LiveTimeline.monotonicNanoseconds()
            try await store.write { db in
                try post.insert(db)
                _ = try LiveTimeline.Post.deleteOne(db, key: id - 1)  // one floor row on screen at a time
            }
        }
    }
}
