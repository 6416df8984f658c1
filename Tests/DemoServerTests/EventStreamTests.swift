import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
import Testing

/// `GET /timeline/events` over real HTTP: the exact bytes of each event,
/// resuming, resets, keep-alives on the server's clock, cuts and shutdown.
@Suite(.timeLimit(.minutes(1))) struct EventStreamTests {
    let routes = AppRoutesTests()

    func post(_ server: DemoServer, _ text: String) async throws -> String {
        let created = try await routes.send(server, .POST, "/posts", json: #"{"text": "\#(text)"}"#, headers: [:])
        #expect(created.status == 201)
        return created.body
    }

    func control(_ server: DemoServer, _ json: String) async throws {
        let answer = try await routes.send(server, .POST, "/_control", json: json, headers: [:])
        #expect(answer.status == 200, "\(answer.body)")
    }

    @Test func eachChangeIsOneEventWithTheNextNumber() async throws {
        try await DemoServer.withRunning { server in
            var stream = try await EventStreamReader.open(server, "/timeline/events")
            #expect(stream.status == 200)
            #expect(stream.headers["content-type"] == "text/event-stream")
            #expect(stream.headers["cache-control"] == "no-cache")

            // When a post is made and another deleted
            let created = try await post(server, "first")
            #expect(try await routes.send(server, .DELETE, "/posts/3", headers: [:]).status == 204)

            // Then the stream carries them, numbered from 1, in exactly this text
            let text = try await stream.next(2)
            #expect(text == "id: 1\nevent: post\ndata: \(created)\n\nid: 2\nevent: delete\ndata: {\"id\":3}\n\n")
            // and the post's data is the post as GET /timeline encodes it
            let timeline = try await routes.send(server, .GET, "/timeline", headers: [:])
            #expect(timeline.body.hasPrefix("[\(created),"), "\(timeline.body.prefix(200))")
            #expect(created.contains(#""id":31"#))
        }
    }

    @Test func lastEventIDResumesWithWhatWasMissedThenGoesLive() async throws {
        try await DemoServer.withRunning { server in
            let posts = [try await post(server, "one"), try await post(server, "two"), try await post(server, "three")]
            var stream = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": "1"])
            #expect(try await stream.next(2) == "id: 2\nevent: post\ndata: \(posts[1])\n\nid: 3\nevent: post\ndata: \(posts[2])\n\n")
            let live = try await post(server, "four")
            #expect(try await stream.next() == "id: 4\nevent: post\ndata: \(live)\n\n")
        }
    }

    @Test func withoutLastEventIDOnlyLaterChangesArrive() async throws {
        try await DemoServer.withRunning { server in
            _ = try await post(server, "before")
            var stream = try await EventStreamReader.open(server, "/timeline/events")
            let after = try await post(server, "after")
            #expect(try await stream.next() == "id: 2\nevent: post\ndata: \(after)\n\n")
        }
    }

    @Test func anIDThatCannotBeResumedFromGetsAResetThenLiveChanges() async throws {
        try await DemoServer.withRunning(.init(changeHistory: 2)) { server in
            for index in 1...5 { _ = try await post(server, "post \(index)") }
            // Kept: 4 and 5, so after 3 still resumes.
            var kept = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": "3"])
            #expect(try await kept.next(2).hasPrefix("id: 4\nevent: post\n"))

            var current = 5
            for lastID in ["2", "99", "soon"] {
                var stream = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": lastID])
                #expect(try await stream.next() == "id: \(current)\nevent: reset\ndata: {\"cursor\":\(current)}\n\n", "Last-Event-ID: \(lastID)")
                let live = try await post(server, "live after \(lastID)")
                current += 1
                #expect(try await stream.next() == "id: \(current)\nevent: post\ndata: \(live)\n\n")
            }
        }
    }

    @Test func keepAlivesFollowTheServerClock() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock)) { server in
            var stream = try await EventStreamReader.open(server, "/timeline/events")
            await clock.sleepers(atLeast: 1)  // the stream's heartbeat waits

            // Just before 15 s: nothing but the change
            clock.advance(by: .seconds(15) - .milliseconds(1))
            let first = try await post(server, "first")
            #expect(try await stream.next() == "id: 1\nevent: post\ndata: \(first)\n\n")
            // At 15 s: the keep-alive
            clock.advance(by: .milliseconds(1))
            #expect(try await stream.next() == ": keep-alive\n\n")

            // Heartbeats off: 15 s pass and the next thing sent is the change
            try await control(server, #"{"heartbeats": false}"#)
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(15))
            await clock.sleepers(atLeast: 1)  // the heartbeat came and went
            let second = try await post(server, "second")
            #expect(try await stream.next() == "id: 2\nevent: post\ndata: \(second)\n\n")

            // And on again
            try await control(server, #"{"heartbeats": true}"#)
            clock.advance(by: .seconds(15))
            #expect(try await stream.next() == ": keep-alive\n\n")
        }
    }

    @Test func cutStreamsEndsEveryOpenStream() async throws {
        try await DemoServer.withRunning { server in
            var first = try await EventStreamReader.open(server, "/timeline/events")
            var second = try await EventStreamReader.open(server, "/timeline/events")
            try await control(server, #"{"cutStreams": true}"#)
            #expect(await first.rest().text.isEmpty)
            #expect(await second.rest().text.isEmpty)

            // A stream opened afterwards works.
            var later = try await EventStreamReader.open(server, "/timeline/events")
            let created = try await post(server, "after the cut")
            #expect(try await later.next() == "id: 1\nevent: post\ndata: \(created)\n\n")
        }
    }

    @Test func cutStreamsMidEventSendsHalfAnEventThatComesAgainInFull() async throws {
        try await DemoServer.withRunning { server in
            let before = try await post(server, "before")
            var stream = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": "0"])
            #expect(try await stream.next() == "id: 1\nevent: post\ndata: \(before)\n\n")

            // When the control cuts in the middle of a change it makes
            try await control(server, #"{"cutStreamsMidEvent": true, "timelineChanges": {"posts": 1}}"#)
            let (half, _) = await stream.rest()

            // Then half an event arrived, with no blank line, and the connection ended
            #expect(half.hasPrefix("id: 2\nevent: post\ndata: {"), "\(half)")
            #expect(!half.contains("\n\n"))
            // and resuming from the last complete event sends it in full.
            var resumed = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": "1"])
            let full = try await resumed.next()
            #expect(full.hasPrefix(half) && full.count > half.count && full.hasSuffix("}\n\n"), "\(full)")
        }
    }

    @Test func stoppingTheServerEndsOpenStreams() async throws {
        let server = try await DemoServer.start()
        var stream = try await EventStreamReader.open(server, "/timeline/events")
        #expect(stream.status == 200)
        // When the server stops (this returns: the stream does not hold the shutdown up)
        await server.stop()
        // Then the stream has ended.
        let (rest, _) = await stream.rest()
        #expect(rest.isEmpty)
    }

    @Test func tenThousandControlChangesStreamInOrder() async throws {
        try await DemoServer.withRunning(.init(changeHistory: 20_000)) { server in
            var stream = try await EventStreamReader.open(server, "/timeline/events")
            try await control(server, #"{"timelineChanges": {"posts": 6000, "deletes": 4000}}"#)
            let text = try await stream.next(10_000)
            let ids = text.split(separator: "\n").filter { $0.hasPrefix("id: ") }.map { Int($0.dropFirst(4)) }
            #expect(ids == (1...10_000).map { $0 })
            #expect(text.components(separatedBy: "event: delete\n").count - 1 == 4000)
        }
    }
}
