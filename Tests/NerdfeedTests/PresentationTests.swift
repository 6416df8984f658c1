import Depot
import DepotStore
import Foundation
import NerdfeedKit
import Testing

@Suite struct PresentationTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    let utc = TimeZone(identifier: "UTC")!

    @Test func relativeTimes() {
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(-10), now: now) == "just now")
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(-61), now: now) == "1 min ago")
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(-150), now: now) == "2 min ago")
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(-7_300), now: now) == "2 h ago")
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(-3 * 86_400), now: now) == "3 d ago")
        #expect(NerdfeedPresentation.relative(nil, now: now) == "")
        // A date in the future (a clock set back) is "just now", not negative.
        #expect(NerdfeedPresentation.relative(now.addingTimeInterval(300), now: now) == "just now")
    }

    @Test func statusLines() {
        let synced = now.addingTimeInterval(-120)
        let offline = SyncError(code: .offline, message: "offline", date: now)
        let broken = SyncError(code: .decoding, message: "FetchForumFeed failed: could not decode the response", date: now)
        func line(_ state: SyncStatus.State, offlineMode: Bool = false, quality: ConnectionQuality? = nil, activity: NetworkController.Activity? = nil) -> String {
            NerdfeedPresentation.statusLine(state, offlineMode: offlineMode, quality: quality, activity: activity, now: now, timeZone: utc)
        }
        let clock = "14:11"  // synced = 2026-09-21 14:11:20 UTC
        #expect(NerdfeedPresentation.clockTime(synced, timeZone: utc) == clock)
        #expect(NerdfeedPresentation.clockTime(synced, timeZone: TimeZone(identifier: "Asia/Tokyo")!) == "23:11")
        #expect(line(.init(isSyncing: true, lastSynced: nil, lastError: nil)) == "syncing…")
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: nil)) == "last synced 2 min ago")
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: offline)) == "offline — showing cached data from \(clock)")
        #expect(line(.init(isSyncing: true, lastSynced: synced, lastError: offline)) == "offline — showing cached data from \(clock) (waiting for the network)")
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: nil), offlineMode: true) == "offline — showing cached data from \(clock)")
        #expect(line(.init(isSyncing: false, lastSynced: nil, lastError: nil), offlineMode: true) == "offline — nothing cached yet")
        #expect(line(.init(isSyncing: false, lastSynced: nil, lastError: offline)) == "offline — nothing cached yet", "a first sync that found no network")
        // What happened and what to do, never the message for logs (an operation's name, SQLite's words).
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: broken)) == "sync failed: the server's answer could not be read; check the address, or try again later — showing data from \(clock)")
        let full = SyncError(code: .storage, message: "FetchForumFeed failed: cache error: write failed (SQLite error 13: database or disk is full)", date: now, storageProblem: .diskFull)
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: full)) == "sync failed: the disk is full, so the new items were not saved; free some space and try again — showing data from \(clock)")
        let failing = SyncError(code: .server, message: "FetchForumFeed failed: server answered 503 Service Unavailable", date: now, status: 503)
        #expect(line(.init(isSyncing: false, lastSynced: nil, lastError: failing)) == "sync failed: the server failed (status 503); try again later")
        let busy = NetworkController.Activity(queued: 2, running: 1, blocked: 0, limit: 4, backingOff: 0)
        #expect(line(.init(isSyncing: false, lastSynced: synced, lastError: nil), quality: .good, activity: busy) == "last synced 2 min ago · network good · 2 queued, 1 running")
    }

    @Test func rowsFitTheWidth() {
        let item = FeedItem(id: "http://h/1", link: "http://h/1", title: String(repeating: "long title ", count: 20), author: "mikew", summary: nil, published: now.addingTimeInterval(-600), feed: "f", isRead: true)
        let row = NerdfeedPresentation.itemLine(item, width: 60, now: now)
        #expect(row.count == 60)
        #expect(row.hasPrefix("✓ long title"))
        #expect(row.hasSuffix("mikew · 10 min ago"))
        #expect(row.contains("…"))
        let song = Song(id: "s", rank: 3, title: "Fetch Twice - Hummingbirds", artist: "Hummingbirds", link: "http://h/s")
        let songRow = NerdfeedPresentation.songLine(song, width: 40)
        #expect(songRow == " 3. Fetch Twice" + String(repeating: " ", count: 13) + "Hummingbirds")
        #expect(songRow.count == 40)
    }

    @Test func theDetailShowsTheLinkOrSaysThereIsNone() {
        let linked = FeedItem(id: "post-1", link: "https://h.example/1", title: "Linked", summary: "Body", feed: "f")
        let detail = NerdfeedPresentation.detailLines(linked, width: 40, now: now, footer: "(press any key)")
        #expect(detail.prefix(2) == ["  Linked", "  https://h.example/1"])
        #expect(detail.contains("  Body"))
        #expect(detail.last == "  (press any key)")

        var unlinked = linked
        unlinked.link = nil
        #expect(NerdfeedPresentation.detailLines(unlinked, width: 40, now: now, footer: "")[1] == "  " + NerdfeedPresentation.noLink)
        // A summary wraps to the width; a terminal too narrow for text still gets one character a line.
        unlinked.summary = String(repeating: "x", count: 10)
        #expect(NerdfeedPresentation.detailLines(unlinked, width: 6, now: now, footer: "").filter { $0 == "  xxxx" }.count == 2)
        #expect(NerdfeedPresentation.detailLines(unlinked, width: 1, now: now, footer: "").filter { $0 == "  x" }.count == 10)
    }

    @Test func jsonGivesEachItemsIdAndItsLinkIfAny() throws {
        let items = [
            FeedItem(id: "post-1", link: "https://h.example/1", title: "Linked", feed: "f"),
            FeedItem(id: "hash:fnv1a64:0123456789abcdef", link: nil, title: "Unlinked", feed: "f", isRead: true),
        ]
        let data = try NerdfeedPresentation.json(items: items, songs: [], feed: .init(isSyncing: false, lastSynced: nil, lastError: nil), offlineMode: true, now: now)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let listed = try #require(object["items"] as? [[String: Any]])
        #expect(listed.map { $0["id"] as? String } == ["post-1", "hash:fnv1a64:0123456789abcdef"])
        #expect(listed[0]["link"] as? String == "https://h.example/1")
        #expect(listed[1]["link"] == nil)
        #expect(listed[1]["read"] as? Bool == true)
    }

    @Test func progressBar() {
        #expect(NerdfeedPresentation.progressBar(0.5, width: 27) == "[##########..........]  50%")
        #expect(NerdfeedPresentation.progressBar(1.5, width: 27).hasPrefix("[####################]"))
    }
}
