import AsyncHTTPClient
import DemoServer
import Foundation
import NIOCore

/// An open server-sent event stream, read as raw bytes: the tests assert on
/// exactly what the server wrote.
///
/// For example:
///
/// ```swift
/// var stream = try await EventStreamReader.open(server, "/timeline/events")
/// _ = try await routes.send(server, .POST, "/posts", json: #"{"text": "hi"}"#)
/// let text = try await stream.next()   // "id: 31\nevent: post\ndata: {…}\n\n"
/// ```
struct EventStreamReader {
    /// The stream ended before the events asked for arrived.
    struct Ended: Error, CustomStringConvertible {
        var unread: String
        var description: String { "the stream ended; unread: \(unread.debugDescription)" }
    }

    /// The response's status.
    let status: Int
    /// The response's headers, names lowercased.
    let headers: [String: String]
    private var iterator: HTTPClientResponse.Body.AsyncIterator
    /// Bytes received and not yet returned.
    private var unread: [UInt8] = []

    /// Opens `path` on `server` with `headers`, and returns once the response head arrived.
    static func open(_ server: DemoServer, _ path: String, headers: [String: String] = [:]) async throws -> EventStreamReader {
        var request = HTTPClientRequest(url: server.baseURL.absoluteString + path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .minutes(2))
        var fields: [String: String] = [:]
        for (name, value) in response.headers { fields[name.lowercased()] = value }
        return EventStreamReader(status: Int(response.status.code), headers: fields, iterator: response.body.makeAsyncIterator())
    }

    /// Reads the next `count` events (or comments), each ended by a blank line,
    /// and returns their exact text.
    mutating func next(_ count: Int = 1) async throws -> String {
        var found = 0
        var position = 0
        while true {
            while found < count, position + 1 < unread.count {
                if unread[position] == 0x0A, unread[position + 1] == 0x0A {
                    found += 1
                    position += 2
                } else {
                    position += 1
                }
            }
            if found == count {
                let text = String(decoding: unread[..<position], as: UTF8.self)
                unread.removeFirst(position)
                return text
            }
            guard let chunk = try await iterator.next() else { throw Ended(unread: String(decoding: unread, as: UTF8.self)) }
            unread += chunk.readableBytesView
        }
    }

    /// Reads until the response ends or the connection closes, and returns
    /// what was not read yet; `closed` says whether it ended with an error
    /// (the connection cut) rather than the response's end.
    mutating func rest() async -> (text: String, closed: Bool) {
        do {
            while let chunk = try await iterator.next() { unread += chunk.readableBytesView }
            return (String(decoding: unread, as: UTF8.self), false)
        } catch {
            return (String(decoding: unread, as: UTF8.self), true)
        }
    }
}
