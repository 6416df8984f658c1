import Foundation

/// Runs a producer (a decoder, a streaming parser) on a thread of its own and
/// hands what it makes, batch by batch, to the calling thread: parsing and
/// writing overlap on two cores, inside the caller's one transaction, and at
/// most `capacity` batches wait in between, so memory is bounded by the
/// batches, not by the whole payload.
///
/// ``JSONArrayIngest`` and Nerdfeed's streaming feed merge are built on it.
///
/// For example, inside a ``CachingOperation``'s `write`:
///
/// ```swift
/// try OverlappedIngest.run(
///     produce: { yield in try parser.parse(body) { batch in try yield(batch) } },
///     consume: { batch in try merge(batch, into: db) }
/// )
/// ```
package enum OverlappedIngest {
    /// Why a producer stopped early: the consumer has gone (it threw, or the
    /// call is returning). A producer should let it propagate.
    package struct Stopped: Error {}

    /// Calls `produce` on another thread and `consume` on the calling thread
    /// with each batch `produce` yields, in order, until `produce` returns.
    ///
    /// - Parameters:
    ///   - capacity: How many batches may wait for the consumer; the producer
    ///     blocks in `yield` while that many wait.
    ///   - produce: Makes the batches, passing each to `yield`. `yield` throws
    ///     ``Stopped`` once the consumer has stopped; let it propagate.
    ///   - consume: Takes one batch, on the calling thread.
    /// - Throws: The first error of either side. Whatever happens, the producer
    ///   has finished when this returns.
    package static func run<Batch: Sendable>(
        capacity: Int = 4,
        produce: @escaping @Sendable (_ yield: (Batch) throws -> Void) throws -> Void,
        consume: (Batch) throws -> Void
    ) throws {
        let pipe = ChunkPipe<Batch>(capacity: max(1, capacity))
        // A thread of its own, not a global queue: the producer runs for the
        // whole payload and blocks while the pipe is full, and on Linux the
        // global queues are the ones Swift concurrency runs its tasks on, a
        // thread per core. Two big syncs there hold every user-initiated
        // thread for seconds, and each task of that priority (results rounds
        // among them) waits for them.
        let producer = Thread {
            do {
                try produce { batch in
                    guard pipe.put(.success(batch)) else { throw Stopped() }
                }
                _ = pipe.put(nil)
            } catch {
                _ = pipe.put(.failure(error))
            }
        }
        producer.name = "Depot.OverlappedIngest"
        producer.qualityOfService = .userInitiated
        producer.start()
        // Whatever happens, stop the producer and wait for it before returning.
        defer { pipe.closeAndDrain() }
        while let next = pipe.take() {
            try consume(next.get())
        }
    }
}

/// A small bounded hand-off between one producer thread and one consumer thread.
///
/// `@unchecked Sendable` is sound: `capacity` and `condition` are constants, and
/// the mutable state (`items`, `closed`, `producerDone`) is read and written only
/// between `condition.lock()` and `condition.unlock()` in `put`, `take` and
/// `closeAndDrain`; nothing else touches it. (`Mutex` cannot be used: the two
/// sides must wait on a condition while the lock is released.)
final class ChunkPipe<Chunk>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Result<Chunk, any Error>?] = []
    private var closed = false
    private var producerDone = false
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds an item (`nil` marks the end). Blocks while full. Returns `false`
    /// once the consumer has closed the pipe: the producer should stop.
    func put(_ item: Result<Chunk, any Error>?) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while items.count >= capacity, !closed { condition.wait() }
        switch item {
        case nil, .failure?: producerDone = true
        case .success?: break
        }
        // Closed: the producer stops, and is done only once `produce` has
        // returned (its last item, `nil` or a failure, says so), so that
        // nothing it holds is still in use when `run` returns.
        guard !closed else {
            condition.broadcast()
            return false
        }
        items.append(item)
        condition.broadcast()
        return true
    }

    /// The next item, or `nil` at the end. Blocks while empty.
    func take() -> Result<Chunk, any Error>? {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty { condition.wait() }
        let item = items.removeFirst()
        condition.broadcast()
        return item
    }

    /// Tells the producer to stop and waits until it has.
    func closeAndDrain() {
        condition.lock()
        defer { condition.unlock() }
        closed = true
        items.removeAll()
        condition.broadcast()
        while !producerDone { condition.wait() }
    }
}
