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

    // MARK: The state machine

    static func event(_ sequence: UInt32, _ detail: NetworkEvent.Detail) -> NetworkEvent {
        NetworkEvent(time: .zero, ticket: Ticket.ID(rawValue: 1), operation: "Op", detail: detail, sequence: sequence)
    }

    static let progress = event(0, .progress(TransferProgress(received: 1)))

    /// Drains what `order` hands out after admitting `event`, as a deliverer would.
    static func deliver(_ event: NetworkEvent, to order: inout EventOrder) -> [String] {
        var out: [String] = []
        var next = order.admit(event)
        while let current = next {
            out.append("\(current.kind)\(current.sequence == 0 ? "" : "#\(current.sequence)")")
            next = order.next()
        }
        return out
    }

    @Test func eventsInTurnGoOutAtOnce() {
        var order = EventOrder()
        #expect(Self.deliver(Self.event(1, .enqueued(priority: .normal, category: .default)), to: &order) == ["enqueued#1"])
        #expect(Self.deliver(Self.event(2, .started(attempt: 1)), to: &order) == ["started#2"])
        #expect(Self.deliver(Self.progress, to: &order) == ["progress"])
        #expect(Self.deliver(Self.event(3, .cancelled), to: &order) == ["cancelled#3"])
        #expect(order.ended)
    }

    @Test func anEarlyEventWaitsForTheOnesBeforeIt() {
        var order = EventOrder()
        // A job's end, numbered after the ticket's enqueued, arrives first.
        #expect(Self.deliver(Self.event(3, .finished(.init(status: 200, bytes: 1, duration: .zero, sample: nil))), to: &order) == [])
        #expect(Self.deliver(Self.progress, to: &order) == [])
        #expect(Self.deliver(Self.event(2, .coalesced(into: Ticket.ID(rawValue: 9))), to: &order) == [])
        #expect(Self.deliver(Self.event(1, .enqueued(priority: .normal, category: .default)), to: &order)
            == ["enqueued#1", "coalesced#2", "finished#3"])
        // The progress that came before `enqueued` is dropped once the ticket ended.
        #expect(Self.deliver(Self.progress, to: &order) == [])
    }

    @Test func progressBeforeEnqueuedWaitsForIt() {
        var order = EventOrder()
        #expect(Self.deliver(Self.progress, to: &order) == [])
        #expect(Self.deliver(Self.event(1, .enqueued(priority: .normal, category: .default)), to: &order) == ["enqueued#1", "progress"])
    }

    /// While one thread delivers, others only queue: the deliverer hands on
    /// what came meanwhile, in order, before it stops.
    @Test func oneDelivererAtATime() {
        var order = EventOrder()
        let first = order.admit(Self.event(1, .enqueued(priority: .normal, category: .default)))
        #expect(first?.sequence == 1)
        // Another thread's events arrive while the first is being delivered.
        #expect(order.admit(Self.event(2, .started(attempt: 1))) == nil)
        #expect(order.admit(Self.progress) == nil)
        #expect(order.admit(Self.event(3, .failed(DepotError(.timedOut)))) == nil)
        #expect(order.next()?.sequence == 2)
        #expect(order.next()?.sequence == 3)
        // The terminal event ended the ticket: the queued progress is dropped.
        #expect(order.next() == nil)
        #expect(order.ended && order.delivered == 3)
    }

    // MARK: Through the controller

    /// Tickets that join a running job, while its progress streams and while
    /// some of them are cancelled, see `enqueued` first and nothing after the end.
    @Test func ticketsJoiningARunningJobSeeEnqueuedFirstAndNothingAfterTheEnd() async throws {
        let url = URL(string: "http://events.test/stream")!
        try await withController(Self.streaming(chunks: 3_000), configure: { $0.observability.eventBufferSize = 10_000_000 }) { controller in
            let events = controller.events()
            let collected = Task { await events.reduce(into: [NetworkEvent]()) { $0.append($1) } }
            let recorder = Recorder(controller.events())
            for round in 0..<400 {
                let ticket = controller.enqueue(FetchRaw(url: url))
                if round % 3 == 0 { ticket.cancel() }
                // The job streams on before the next ticket comes: this one has
                // seen a chunk arrive, or has ended.
                _ = try await recorder.next { $0.ticket == ticket.id && ($0.kind == .progress || $0.kind.isTerminal) }
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
