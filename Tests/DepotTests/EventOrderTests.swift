@testable import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// The events of one ticket arrive in order: `enqueued` first, nothing after
/// its terminal event (`finished`, `failed` or `cancelled`).
@Suite(.timeLimit(.minutes(1))) struct EventOrderTests {
    /// A body of `chunks` one-byte chunks, produced as fast as they are read.
    private static func streaming(chunks: Int) -> ScriptedTransport {
        ScriptedTransport { _ in
            let sent = Mutex(0)
            return TransportResponse(status: 200, body: TransportBody(unfolding: {
                let n = sent.withLock { count in
                    count += 1
                    return count
                }
                return n <= chunks ? Data("x".utf8) : nil
            }))
        }
    }

    /// Checks every ticket's events; returns the first violation.
    private static func firstViolation(in events: [NetworkEvent]) -> String? {
        var seen: [Ticket.ID: [NetworkEvent]] = [:]
        for event in events {
            guard let ticket = event.ticket else { continue }
            seen[ticket, default: []].append(event)
        }
        for (ticket, list) in seen {
            guard list.first?.kind == .enqueued else {
                return "\(ticket): first event is \(list.first.map { "\($0.kind)" } ?? "none")"
            }
            if let end = list.firstIndex(where: \.kind.isTerminal), end != list.count - 1 {
                return "\(ticket): \(list[end + 1].kind) after \(list[end].kind)"
            }
            if list.dropFirst().contains(where: { $0.kind == .enqueued }) {
                return "\(ticket): enqueued twice"
            }
        }
        return nil
    }

    /// Tickets that join a running job, while its progress streams and while
    /// some of them are cancelled, see `enqueued` first and nothing after the end.
    @Test func ticketsJoiningARunningJobSeeEnqueuedFirstAndNothingAfterTheEnd() async throws {
        let url = URL(string: "http://events.test/stream")!
        try await withController(Self.streaming(chunks: 3_000), configure: { $0.eventBufferSize = 10_000_000 }) { controller in
            let events = controller.events
            let collected = Task { await events.reduce(into: [NetworkEvent]()) { $0.append($1) } }
            for round in 0..<400 {
                let ticket = controller.enqueue(FetchRaw(url: url))
                if round % 3 == 0 { ticket.cancel() }
                await Task.yield()
            }
            await controller.waitUntilIdle()
            _ = await controller.shutdown(grace: .zero)
            let all = await collected.value
            #expect(all.contains { $0.kind == .progress })
            #expect(all.contains { $0.kind == .coalesced })
            let violation = Self.firstViolation(in: all)
            #expect(violation == nil, "\(violation ?? "")")
        }
    }
}
