import Depot
import Foundation

extension FeedParser {
    /// Parses a feed document pushed to it in chunks as they arrive (from the
    /// network, say), handing its items over in batches as the parser meets
    /// them: the document is never held whole.
    ///
    /// It reads exactly as ``FeedParser/parse(_:baseURL:removingBreadcrumbs:batchSize:_:)``
    /// does, and fails the same way, as early as the bytes allow: a chunk that
    /// breaks UTF-8 or makes the XML malformed throws from ``feed(_:)``.
    /// Entities a document declares are never expanded, so billion laughs and
    /// quadratic blowup cost nothing.
    ///
    /// For example:
    ///
    /// ```swift
    /// let parser = FeedParser.Incremental(baseURL: feedURL) { batch in try insert(batch) }
    /// while let chunk = try body.next() { try parser.feed(chunk) }
    /// let summary = try parser.finish()
    /// ```
    ///
    /// One instance reads one document, on one thread at a time.
    public final class Incremental {
        private let reader: FeedReader
        private let stream: XMLStream
        /// The first bytes, until there are enough to tell the encoding.
        private var head = Data()
        private var started = false
        /// Whether the bytes must be UTF-8 (libxml2 reads them as such).
        private var checksUTF8 = false
        /// The start of a UTF-8 sequence the next chunk completes.
        private var carry = Data()
        /// How many bytes went to libxml2 (the offset of `carry`).
        private var offset = 0
        private var finished = false

        /// Makes a parser for one document.
        ///
        /// - Parameters:
        ///   - baseURL: The URL the feed was fetched from; relative links resolve against it.
        ///   - removingBreadcrumbs: Whether to trim forum breadcrumbs from titles.
        ///   - batchSize: The most items handed over at a time (at least 1).
        ///   - body: Takes each batch, on the thread that calls ``feed(_:)`` or
        ///     ``finish()``. If it throws, parsing stops and that call rethrows it.
        public init(baseURL: URL, removingBreadcrumbs: Bool = true, batchSize: Int = FeedParser.defaultBatchSize, _ body: @escaping ([ParsedItem]) throws -> Void) {
            reader = FeedReader(baseURL: baseURL, removingBreadcrumbs: removingBreadcrumbs, batchSize: batchSize, deliver: body)
            stream = XMLStream(handler: reader)
        }

        /// Reads the next bytes of the document.
        ///
        /// - Throws: `.decoding` as soon as the document is known to be
        ///   malformed, not UTF-8 where it must be, or not a feed's; or what
        ///   the batch receiver threw. Then stop feeding.
        public func feed(_ chunk: Data) throws {
            precondition(!finished, "feed(_:) after finish()")
            guard !chunk.isEmpty else { return }
            if !started {
                head.append(chunk)
                guard head.count >= FeedEncoding.headLength else { return }
                try start()
            } else {
                try push(chunk)
            }
        }

        /// Ends the document and hands over the items that are left.
        ///
        /// - Returns: The feed's title and how many items were handed over or skipped.
        /// - Throws: `.decoding` for an empty, truncated or malformed
        ///   document, or one that is not a feed; or what the batch receiver threw.
        @discardableResult
        public func finish() throws -> Summary {
            precondition(!finished, "finish() called twice")
            finished = true
            if !started {
                guard !head.isEmpty else { throw FeedParseFailure.error("the feed is empty") }
                try start()
            }
            if checksUTF8, !carry.isEmpty {
                // A sequence the document never completed.
                throw FeedEncoding.invalidUTF8(at: offset + (FeedEncoding.firstInvalidUTF8(carry) ?? 0))
            }
            return try FeedParser.summary(of: reader, failure: stream.end())
        }

        /// Decides how the bytes are checked, and starts libxml2 with the first ones.
        private func start() throws {
            started = true
            checksUTF8 = try FeedEncoding.readsAsUTF8(head: head.prefix(FeedEncoding.headLength))
            let bytes = head
            head = Data()
            if checksUTF8 {
                try push(bytes)
                return
            }
            try begin(with: bytes)
            try pass(bytes.dropFirst(min(4, bytes.count)))
        }

        /// Checks the bytes that complete UTF-8 sequences, and passes them on.
        private func push(_ chunk: Data) throws {
            guard checksUTF8 else { return try pass(chunk) }
            let bytes = carry.isEmpty ? chunk : carry + chunk
            let complete = FeedEncoding.completePrefixLength(bytes)
            let ready = bytes.prefix(complete)
            if let invalid = FeedEncoding.firstInvalidUTF8(ready) {
                throw FeedEncoding.invalidUTF8(at: offset + invalid)
            }
            carry = Data(bytes.dropFirst(complete))
            if stream.isReading || offset > 0 {
                try pass(ready)
            } else {
                try begin(with: ready)
                try pass(ready.dropFirst(min(4, ready.count)))
            }
        }

        /// Starts libxml2 with the document's first bytes (4 tell it the encoding).
        private func begin(with bytes: Data) throws {
            let head = bytes.prefix(4)
            let failure = head.withUnsafeBytes { raw in stream.begin(raw.bindMemory(to: CChar.self)) }
            offset += head.count
            if let failure { throw FeedParseFailure.error("malformed XML: \(failure.message)", xmlError: failure) }
        }

        /// Hands checked bytes to libxml2, and throws as soon as the read failed.
        private func pass(_ bytes: Data) throws {
            offset += bytes.count
            bytes.withUnsafeBytes { raw in stream.push(raw.bindMemory(to: CChar.self)) }
            guard !stream.isReading else { return }
            try FeedParser.throwIfFailed(reader, stream.firstError)
        }
    }
}
