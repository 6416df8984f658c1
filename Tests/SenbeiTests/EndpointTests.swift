import DemoServer
import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Every Senbei endpoint through the app, against the real server and a real
/// SQLite file: what lands in the cache, and the notification that says so.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct EndpointTests {
    @Test func loginPostsDidLoginWithTheProfile() async throws {
        try await withSenbei { f in
            let profile = try await f.app.login()
            #expect(profile == Profile(username: "admin", name: "Admin User", email: "admin@example.com"))
            #expect(f.app.profile == profile)
            #expect(f.log.names == [.senbeiDidLogin])
            #expect(f.log.last(.senbeiDidLogin)?.payload as? Profile == profile)
            #expect(f.served("GET /profile") == 1)
        }
    }

    @Test(arguments: EntityKind.allCases)
    func eachListIsCachedAndAnnounced(_ kind: EntityKind) async throws {
        try await withSenbei { f in
            // When page 1 is loaded (signing in first, since nobody is)
            let page = try await f.app.loadPage(kind)

            // Then it came from the server, sits in the cache, and was announced with its kind
            #expect(page.source == .network)
            #expect(page.items.count == 20)
            #expect(page.info.page == 1 && page.info.total >= 40)
            let cached = try await f.store.read { db in try Entity.onPage(kind, 1).fetchAll(db) }
            #expect(cached == page.items)
            #expect(f.log.names == [.senbeiDidLogin, SenbeiNotification.didRetrieve(kind)])
            let posted = try #require(f.log.last(SenbeiNotification.didRetrieve(kind)))
            #expect(posted.payload as? EntityPage == page)
            #expect(posted.entity as? EntityKind == kind)
        }
    }

    @Test func commentsAreListedPostedAndDeleted() async throws {
        try await withSenbei { f in
            let subject = Commentable(.contacts, 3)

            // Post
            let comment = try await f.app.sent(f.app.postComment(on: subject, text: "Called, no answer"))
            #expect(comment.text == "Called, no answer" && comment.commentableType == "contact" && comment.commentableId == 3)
            let posted = try #require(f.log.last(.senbeiDidPostComment))
            #expect(posted.payload as? CRMComment == comment)
            #expect(posted.entity as? Commentable == subject)

            // List
            let listed = try await f.app.loadComments(on: subject).rows
            #expect(listed == [comment])
            #expect(f.log.last(.senbeiDidRetrieveComments)?.payload as? [CRMComment] == [comment])
            #expect(f.log.last(.senbeiDidRetrieveComments)?.entity as? Commentable == subject)

            // Delete: gone from the server and the cache
            _ = try await f.app.sent(f.app.deleteComment(id: comment.id))
            #expect(f.log.last(.senbeiDidDeleteComment)?.payload as? Int == comment.id)
            #expect(try await f.store.read { db in try CRMComment.fetchCount(db) } == 0)
            #expect(try await f.app.loadComments(on: subject).rows.isEmpty)
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidPostComment, .senbeiDidRetrieveComments, .senbeiDidDeleteComment, .senbeiDidRetrieveComments])
        }
    }

    @Test func tasksAreListedMarkedDoneAndCreated() async throws {
        try await withSenbei { f in
            let loaded = try await f.app.loadTasks()
            #expect(loaded.source == .network)
            let tasks = loaded.rows
            #expect(tasks.count == 12)
            #expect(tasks.filter { $0.due == nil }.count == 2)
            #expect(f.log.last(.senbeiDidRetrieveTasks)?.payload as? [CRMTask] == tasks)

            // Mark one done: the cache no longer lists it as open
            let done = try await f.app.sent(f.app.markTaskDone(id: 3))
            #expect(done.completed && done.id == 3)
            #expect(f.log.last(.senbeiDidMarkTaskAsDone)?.payload as? CRMTask == done)
            #expect(f.log.last(.senbeiDidMarkTaskAsDone)?.entity as? Int == 3)
            #expect(try await f.store.read { db in try CRMTask.open.fetchAll(db) }.map(\.id).contains(3) == false)
            // And the task buckets, synced a moment ago, are stale: the next list asks the server
            #expect(try await f.store.ledger.entry(for: FetchTasks().cacheKey)?.isStale == true)
            #expect(try await f.app.loadTasks().source == .network)
            #expect(try await f.store.ledger.entry(for: FetchTasks().cacheKey)?.isStale == false)

            // Create one without a due day: due as soon as possible
            let created = try await f.app.sent(f.app.createTask(name: "Send the contract"))
            #expect(created.due == nil && created.name == "Send the contract")
            #expect(f.log.last(.senbeiDidCreateTask)?.payload as? CRMTask == created)
            let open = try await f.store.read { db in try CRMTask.open.fetchAll(db) }
            #expect(open.count == 12 && open.contains(created))
        }
    }

    @Test func aNewContactGoesToTheTopOfPageOne() async throws {
        try await withSenbei { f in
            let before = try await f.app.loadPage(.contacts)
            _ = try await f.app.loadPage(.contacts, page: 2)
            let contact = try await f.app.sent(f.app.createContact(name: "Zoe Quinn", email: "zoe@example.com"))
            #expect(contact.name == "Zoe Quinn" && contact.email == "zoe@example.com")
            let posted = try #require(f.log.last(.senbeiDidCreateContact))
            #expect(posted.payload as? Entity == contact)
            #expect(posted.entity as? Int == contact.id)

            // The accepted change made every contact page stale, young as they are
            #expect(try await f.store.ledger.entry(for: FetchList(.contacts).cacheKey)?.isStale == true)
            #expect(try await f.store.ledger.entry(for: FetchList(.contacts, page: 2).cacheKey)?.isStale == true)

            // So the next load asks the server, which lists it first and counts it
            let next = try await f.app.loadPage(.contacts)
            #expect(next.source == .network)
            #expect(next.items.first?.id == contact.id && next.items.count == 20)
            #expect(next.info.total == before.info.total + 1)

            // And the page is fresh again: the load after that is the cache's
            let cached = try await f.app.loadPage(.contacts)
            #expect(cached.source == .cache)
            #expect(cached.items.first?.id == contact.id)
        }
    }

    @Test func activitiesAreListedNewestFirst() async throws {
        try await withSenbei { f in
            _ = try await f.app.sent(f.app.markTaskDone(id: 1))
            let activities = try await f.app.loadActivities().rows
            #expect(activities.count == 4)
            #expect(activities.first?.action == "completed")
            #expect(activities.map(\.position) == [0, 1, 2, 3])
            #expect(f.log.last(.senbeiDidRetrieveActivities)?.payload as? [CRMActivity] == activities)
        }
    }

    @Test func aValidationErrorCarriesTheServersMessage() async throws {
        try await withSenbei { f in
            try await f.app.login()
            // When the server refuses a task without a name
            let error = await #expect(throws: DepotError.self) { try await f.app.sent(f.app.createTask(name: " ", due: "soon")) }

            // Then the error carries its words, and the CLI's sentence uses them
            #expect(error?.status == 422)
            #expect(error?.validationErrors?.fullMessages == ["due must be yyyy-MM-dd", "name can't be blank"])
            #expect(error.map { SenbeiPresentation.message(for: $0) } == "Not saved: due must be yyyy-MM-dd; name can't be blank.")
            let posted = try #require(f.log.last(.senbeiDidFailWithError))
            #expect(posted.error?.validationErrors == error?.validationErrors)
            #expect(posted.operation == "CreateTask")
            #expect(try await f.store.read { db in try CRMTask.fetchCount(db) } == 0, "nothing was written")

            // And a contact with a bad address says so
            let contact = await #expect(throws: DepotError.self) { try await f.app.sent(f.app.createContact(name: "No Mail", email: "nope")) }
            #expect(contact.map { SenbeiPresentation.message(for: $0) } == "Not saved: email is invalid.")
        }
    }

    @Test func aMissingRecordIsExplainedInOneSentence() async throws {
        try await withSenbei { f in
            let task = await #expect(throws: DepotError.self) { try await f.app.sent(f.app.markTaskDone(id: 999)) }
            #expect(task?.code == .notFound)
            #expect(task.map { SenbeiPresentation.message(for: $0) } == "There is no task 999.")
            let comment = await #expect(throws: DepotError.self) { try await f.app.sent(f.app.deleteComment(id: 999)) }
            #expect(comment.map { SenbeiPresentation.message(for: $0) } == "There is no comment 999.")
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidFailWithError, .senbeiDidFailWithError])
        }
    }
}
