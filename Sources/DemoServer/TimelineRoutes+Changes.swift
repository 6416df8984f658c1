import Foundation
import Seeded

extension TimelineRoutes {
    /// A Timeline change: a post created, or a post deleted.
    enum Change: FeedChange {
        case post(Post)
        case delete(id: Int)

        var event: String {
            switch self {
            case .post: "post"
            case .delete: "delete"
            }
        }

        func data() throws -> String {
            switch self {
            case .post(let post): String(decoding: try SenbeiRoutes.encoder.encode(post), as: UTF8.self)
            case .delete(let id): #"{"id":\#(id)}"#
            }
        }

        func entryMembers() throws -> String {
            switch self {
            case .post: #""post":\#(try data())"#
            case .delete(let id): #""id":\#(id)"#
            }
        }
    }

    /// The Timeline's posts, oldest first (ids only grow), and what makes new ones.
    struct Model: Sendable {
        var posts: [Post]
        /// The id the next post gets: ids are never reused, even after a delete.
        var nextID: Int
        /// Picks the authors and texts of seeded posts, and the posts the control deletes.
        var random: SplitMix64

        /// The posts with `since < id < before`, newest first, at most `limit`.
        func newestFirst(since: Int, before: Int, limit: Int) -> [Post] {
            let end = index(firstAtLeast: before)
            let start = index(firstAtLeast: since == Int.max ? since : since + 1)
            guard start < end else { return [] }
            return Array(posts[max(start, end - limit)..<end].reversed())
        }

        /// Adds a post with the next id, and records it.
        mutating func add(author: String, text: String, avatar: String, log: inout ChangeLog<Change>) -> Post {
            let post = Post(id: nextID, author: author, text: text, avatar: avatar)
            nextID += 1
            posts.append(post)
            log.record(.post(post))
            return post
        }

        /// Adds a post with a seeded author and text.
        mutating func addSeeded(log: inout ChangeLog<Change>) {
            let (author, text, avatar) = Self.seeded(&random)
            _ = add(author: author, text: text, avatar: avatar, log: &log)
        }

        /// Deletes the post `id`, and records it; `false` when there is none.
        mutating func delete(id: Int, log: inout ChangeLog<Change>) -> Bool {
            let index = index(firstAtLeast: id)
            guard posts.indices.contains(index), posts[index].id == id else { return false }
            posts.remove(at: index)
            log.record(.delete(id: id))
            return true
        }

        /// Makes `posts` seeded posts and deletes `deletes` posts picked by the
        /// seed (fewer when fewer exist), each a change (`"timelineChanges"`).
        mutating func makeChanges(posts count: Int, deletes: Int, log: inout ChangeLog<Change>) {
            for _ in 0..<max(0, count) { addSeeded(log: &log) }
            for _ in 0..<max(0, deletes) where !posts.isEmpty {
                let victim = posts[Int(random.next() % UInt64(posts.count))].id
                _ = delete(id: victim, log: &log)
            }
        }

        /// The index of the first post whose id is at least `id` (binary search).
        private func index(firstAtLeast id: Int) -> Int {
            var low = 0, high = posts.count
            while low < high {
                let middle = (low + high) / 2
                if posts[middle].id < id { low = middle + 1 } else { high = middle }
            }
            return low
        }

        static let authors = ["joeconway", "aaronh", "bnr_student", "swiftling", "feedreader42", "mainactor", "kmackenzie", "mikew", "offline_first", "tunnelrat", "retry_after", "sendable"]
        static let lines = ["Shipped it.", "Who else is offline right now?", "The timeline loads before the avatars. As it should.", "Retry-After: 30", "Cache first, ask later.", "Posting from the tunnel."]

        /// The next seeded author, text and avatar.
        static func seeded(_ random: inout SplitMix64) -> (author: String, text: String, avatar: String) {
            let author = Int(random.next() % UInt64(authors.count))
            return (authors[author], lines[Int(random.next() % UInt64(lines.count))], "/avatars/\(author + 1).png")
        }
    }

    /// The Timeline's feed at start: `configuration.timelinePosts` seeded posts, ids 1...N, at change 0.
    static func makeFeed(_ configuration: DemoServer.Configuration) -> ChangeFeed<Model, Change> {
        var random = SplitMix64(seed: configuration.seed &+ 7)
        let count = max(0, configuration.timelinePosts)
        let posts = (0..<count).map { index -> Post in
            let (author, text, avatar) = Model.seeded(&random)
            return Post(id: index + 1, author: author, text: text, avatar: avatar)
        }
        return ChangeFeed(model: Model(posts: posts, nextID: count + 1, random: random), capacity: configuration.changeHistory)
    }
}
