import Depot
import Foundation

/// A response body as it arrives, read chunk by chunk inside a
/// ``StreamingCachingOperation``'s write transaction.
///
/// The transfer hands chunks in from Swift concurrency and waits (suspending,
/// never blocking a thread) while a few chunks are waiting; the transaction's
/// thread, the store's writer, takes them with ``next()``, which blocks until
/// one comes. So memory holds a few chunks, whatever the body's size, when
/// the transport stops reading while the transfer waits
/// (`AsyncHTTPClientTransport` does; `URLSessionTransport` keeps what
/// arrives meanwhile).
///
/// For example, in ``StreamingCachingOperation/write(_:of:to:)``:
///
/// ```swift
/// var bytes = 0
/// while let chunk = try body.next() { bytes += chunk.count }
/// ```
///
/// `@unchecked Sendable` is sound: `capacity` and `condition` are constants,
/// and every other property is read and written only between
/// `condition.lock()` and `condition.unlock()`; continuations are resumed
/// after the lock is released. (`Mutex` cannot be used: the reader waits on a
/// condition while the lock is released.)
public final class StreamedBody: @unchecked Sendable {
    /// How many chunks may wait for the reader by default.
    static let defaultCapacity = 4

    private enum Ending {
        case complete
        case failed(any Error)
    }

    private let condition = NSCondition()
    private let capacity: Int
    private var chunks: [Data] = []
    /// A chunk that found the queue full, and the sender waiting for room for it.
    private var waiting: (chunk: Data, sender: CheckedContinuation<Void, any Error>)?
    private var ending: Ending?
    /// The reader has stopped reading: what is sent from now on is dropped.
    private var readerDone = false
    /// Why the reader stopped, if it failed: sends throw it.
    private var readerError: (any Error)?
    /// Whether ``next()`` or ``awaitEnd()`` threw the transfer's failure.
    private var threwTransferFailure = false

    init(capacity: Int = StreamedBody.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// The next chunk, in order, or `nil` once the whole body has arrived (its
    /// length checked). Blocks until one or the other: call it on the writer's
    /// thread, never from Swift concurrency.
    ///
    /// - Throws: The transfer's failure (a truncated body, a timeout, a lost
    ///   connection, cancellation): let it propagate, and the transaction
    ///   rolls back.
    public func next() throws -> Data? {
        condition.lock()
        while chunks.isEmpty, ending == nil { condition.wait() }
        if case .failed(let error) = ending {
            threwTransferFailure = true
            condition.unlock()
            throw error
        }
        guard !chunks.isEmpty else {
            condition.unlock()
            return nil
        }
        let chunk = chunks.removeFirst()
        let sender = admitWaiting()
        condition.unlock()
        sender?.resume()
        return chunk
    }

    /// Moves the waiting chunk into the queue; its sender is resumed after the lock.
    private func admitWaiting() -> CheckedContinuation<Void, any Error>? {
        guard let waiting, chunks.count < capacity else { return nil }
        self.waiting = nil
        chunks.append(waiting.chunk)
        condition.broadcast()
        return waiting.sender
    }

    // MARK: - The transfer's side

    /// Hands a chunk to the reader, waiting while the queue is full.
    /// Throws what the reader failed with, or `CancellationError` when the
    /// task is cancelled while it waits.
    func send(_ chunk: Data) async throws {
        enum Admission { case done, full, refused(any Error) }
        let admission: Admission = {
            condition.lock()
            defer { condition.unlock() }
            if let readerError { return .refused(readerError) }
            if readerDone || ending != nil { return .done }
            guard chunks.count < capacity else { return .full }
            chunks.append(chunk)
            condition.broadcast()
            return .done
        }()
        switch admission {
        case .done: return
        case .refused(let error): throw error
        case .full: break
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (sender: CheckedContinuation<Void, any Error>) in
                condition.lock()
                if let readerError {
                    condition.unlock()
                    sender.resume(throwing: readerError)
                } else if readerDone || ending != nil {
                    condition.unlock()
                    sender.resume()
                } else if chunks.count < capacity {
                    chunks.append(chunk)
                    condition.broadcast()
                    condition.unlock()
                    sender.resume()
                } else if Task.isCancelled {
                    condition.unlock()
                    sender.resume(throwing: CancellationError())
                } else {
                    waiting = (chunk, sender)
                    condition.unlock()
                }
            }
        } onCancel: {
            condition.lock()
            let sender = waiting?.sender
            waiting = nil
            condition.unlock()
            sender?.resume(throwing: CancellationError())
        }
    }

    /// The whole body has arrived and is accepted: ``next()`` returns `nil`
    /// after the last chunk, and ``awaitEnd()`` returns.
    func complete() {
        end(.complete)
    }

    /// The body will not be used: ``next()`` and ``awaitEnd()`` throw `error`.
    func fail(_ error: any Error) {
        end(.failed(error))
    }

    private func end(_ how: Ending) {
        condition.lock()
        guard ending == nil else {
            condition.unlock()
            return
        }
        ending = how
        let sender = waiting?.sender
        waiting = nil
        condition.broadcast()
        condition.unlock()
        sender?.resume()
    }

    // MARK: - The reader's side, besides next()

    /// The reader has stopped, with `error` if it failed: chunks waiting are
    /// dropped, and later sends are dropped too (or throw `error`).
    func finishReading(error: (any Error)?) {
        condition.lock()
        readerDone = true
        readerError = error
        chunks.removeAll()
        let sender = waiting?.sender
        waiting = nil
        condition.broadcast()
        condition.unlock()
        if let error { sender?.resume(throwing: error) } else { sender?.resume() }
    }

    /// Blocks until the body is complete, or throws why it will not be used.
    func awaitEnd() throws {
        condition.lock()
        while ending == nil { condition.wait() }
        let ending = self.ending
        if case .failed = ending { threwTransferFailure = true }
        condition.unlock()
        if case .failed(let error) = ending { throw error }
    }

    /// Whether the reader was stopped by the transfer's failure (handed to
    /// it by ``next()`` or ``awaitEnd()``) rather than by its own.
    var failedWithTheTransfer: Bool {
        condition.lock()
        defer { condition.unlock() }
        return threwTransferFailure
    }
}
