/// An asynchronous sequence of Depot's values: a controller's events, a
/// results controller's updates, an outbox's snapshots.
///
/// Each is a subscription of its own, made by the method that returns it
/// (``NetworkController/events()``, for example): values before that call are
/// not replayed. Iterate it once. The subscription ends when the iteration is
/// cancelled, or when the sequence and its iterator are released, or when its
/// source ends (a controller that shut down).
///
/// For example:
///
/// ```swift
/// let events: NetworkEvents = controller.events()
/// for await event in events where event.kind == .failed {
///     print(event)
/// }
/// ```
///
/// A named type rather than an `AsyncStream`, so that how values are buffered
/// can change without changing the API.
public struct DepotStream<Element: Sendable>: AsyncSequence, Sendable {
    @usableFromInline let base: AsyncStream<Element>

    /// Wraps a stream (Depot's own sources make these).
    package init(_ base: AsyncStream<Element>) {
        self.base = base
    }

    /// The iterator.
    public struct AsyncIterator: AsyncIteratorProtocol {
        @usableFromInline var base: AsyncStream<Element>.Iterator

        @usableFromInline init(base: AsyncStream<Element>.Iterator) {
            self.base = base
        }

        /// The next value, or `nil` once the subscription has ended.
        @inlinable
        public mutating func next() async -> Element? {
            await base.next()
        }

        /// The next value, or `nil` once the subscription has ended.
        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }

    /// Starts iterating.
    @inlinable
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator())
    }
}

/// A controller's events from the time of the ``NetworkController/events()`` call.
public typealias NetworkEvents = DepotStream<NetworkEvent>
