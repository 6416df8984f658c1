@testable import Depot
import Foundation
import Testing

/// The hub that fans events out to `events` subscribers.
@Suite(.timeLimit(.minutes(1))) struct EventHubTests {
    static func event(_ number: Int) -> NetworkEvent {
        NetworkEvent(time: .milliseconds(number), ticket: Ticket.ID(rawValue: UInt64(number)), operation: "Op", detail: .cancelled)
    }

    @Test func everySubscriberGetsEveryEventInOrder() async {
        let hub = EventHub(bufferSize: 100)
        let first = hub.subscribe()
        let second = hub.subscribe()
        #expect(hub.hasSubscribers)
        for number in 1...5 { hub.emit(Self.event(number)) }
        hub.finish()
        let a = await first.reduce(into: []) { $0.append($1.ticket?.rawValue ?? 0) }
        let b = await second.reduce(into: []) { $0.append($1.ticket?.rawValue ?? 0) }
        #expect(a == [1, 2, 3, 4, 5])
        #expect(b == [1, 2, 3, 4, 5])
    }

    @Test func aSubscriberThatFallsBehindKeepsTheNewest() async {
        let hub = EventHub(bufferSize: 3)
        let stream = hub.subscribe()
        for number in 1...10 { hub.emit(Self.event(number)) }
        hub.finish()
        let kept = await stream.reduce(into: []) { $0.append($1.ticket?.rawValue ?? 0) }
        #expect(kept == [8, 9, 10])
    }

    @Test func eventsBeforeASubscriptionAreNotReplayed() async {
        let hub = EventHub(bufferSize: 10)
        hub.emit(Self.event(1))
        #expect(!hub.hasSubscribers)
        let stream = hub.subscribe()
        hub.emit(Self.event(2))
        hub.finish()
        let seen = await stream.reduce(into: []) { $0.append($1.ticket?.rawValue ?? 0) }
        #expect(seen == [2])
    }

    @Test func aSubscriptionAfterFinishEndsAtOnce() async {
        let hub = EventHub(bufferSize: 10)
        hub.finish()
        let stream = hub.subscribe()
        #expect(!hub.hasSubscribers)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test func aDroppedSubscriptionUnsubscribes() async {
        let hub = EventHub(bufferSize: 10)
        do {
            var iterator: AsyncStream<NetworkEvent>.Iterator? = hub.subscribe().makeAsyncIterator()
            #expect(hub.hasSubscribers)
            iterator = nil
            _ = iterator
        }
        #expect(!hub.hasSubscribers)
    }
}
