import Foundation
import Hummingbird

extension SenbeiRoutes {
    /// A CRM change: a contact or a task as it is now (created, edited, or
    /// completed), or a contact deleted.
    ///
    /// The CRM has one change feed for both collections, so that a client
    /// follows every edit with one cursor and one connection. A deleted contact
    /// is a tombstone, as the Timeline's deleted posts are: `delete-contact`
    /// with `{"id":N}`. No route deletes a task; one would be `delete-task`.
    enum Change: FeedChange {
        case contact(Entity)
        case task(CRMTask)
        case deleteContact(id: Int)

        var event: String {
            switch self {
            case .contact: "contact"
            case .task: "task"
            case .deleteContact: "delete-contact"
            }
        }

        func data() throws -> String {
            switch self {
            case .contact(let contact): String(decoding: try encoder.encode(contact), as: UTF8.self)
            case .task(let task): String(decoding: try encoder.encode(task), as: UTF8.self)
            case .deleteContact(let id): #"{"id":\#(id)}"#
            }
        }

        func entryMembers() throws -> String {
            switch self {
            case .contact, .task: #""\#(event)":\#(try data())"#
            case .deleteContact(let id): #""id":\#(id)"#
            }
        }
    }

    /// The CRM's feed at start: the seeded store, at change 0.
    static func makeFeed(_ configuration: DemoServer.Configuration, today: Date) -> ChangeFeed<Store, Change> {
        ChangeFeed(model: makeStore(seed: configuration.seed, today: today), capacity: configuration.changeHistory)
    }

    /// `GET /crm/events` and `GET /crm/changes?since=N&limit=M`: one feed for
    /// contacts and tasks (``Change``), behind the CRM's authentication.
    ///
    /// Events are `event: contact` and `event: task` with the item exactly as
    /// `GET /contacts` and `GET /tasks` encode it (a completed task has
    /// `"completed":true`, and leaves `GET /tasks`; an edited contact has its
    /// new `version`), and `event: delete-contact` with `{"id":N}`. Entries of
    /// `/crm/changes` are `{"seq":N,"change":"contact","contact":{…}}`,
    /// `{"seq":N,"change":"task","task":{…}}` and
    /// `{"seq":N,"change":"delete-contact","id":N}`. `GET /contacts` (every list)
    /// and `GET /tasks` carry the feed's `Change-Cursor`. The stream and the
    /// page follow ``EventStream`` and ``ChangeFeed/changesResponse(to:)``.
    static func addChanges(to crm: RouterGroup<DemoRequestContext>, state: ServerState) {
        crm.get("/crm/events") { request, context in
            EventStream.response(to: request, context: context, feed: state.crm, state: state)
        }
        crm.get("/crm/changes") { request, _ in
            try state.crm.changesResponse(to: request)
        }
    }
}

extension SenbeiRoutes.Store {
    /// Adds a contact on top of the list, with its activity, and records it.
    mutating func addContact(name: String, email: String?, log: inout ChangeLog<SenbeiRoutes.Change>) -> SenbeiRoutes.Entity {
        nextID += 1
        let contact = SenbeiRoutes.Entity(id: nextID, name: name, email: email, company: nil)
        lists["contacts", default: []].insert(contact, at: 0)
        activities.insert(SenbeiRoutes.Activity(id: nextID, action: "created", subject: "contact \(name)"), at: 0)
        log.record(.contact(contact))
        return contact
    }

    /// Adds a task, with its activity, and records it.
    mutating func addTask(name: String, due: String?, log: inout ChangeLog<SenbeiRoutes.Change>) -> SenbeiRoutes.CRMTask {
        nextID += 1
        let task = SenbeiRoutes.CRMTask(id: nextID, name: name, due: due, completed: false)
        tasks.append(task)
        activities.insert(SenbeiRoutes.Activity(id: nextID, action: "created", subject: "task \(name)"), at: 0)
        log.record(.task(task))
        return task
    }

    /// Completes the task `id`, with its activity, and records it; `nil` when there is none.
    mutating func completeTask(id: Int, log: inout ChangeLog<SenbeiRoutes.Change>) -> SenbeiRoutes.CRMTask? {
        guard let index = tasks.firstIndex(where: { $0.id == id }) else { return nil }
        tasks[index].completed = true
        nextID += 1
        activities.insert(SenbeiRoutes.Activity(id: nextID, action: "completed", subject: "task \(tasks[index].name)"), at: 0)
        log.record(.task(tasks[index]))
        return tasks[index]
    }

    /// Makes `contacts` contacts and `tasks` tasks with generated names, each a change (`"crmChanges"`).
    mutating func makeChanges(contacts: Int, tasks count: Int, log: inout ChangeLog<SenbeiRoutes.Change>) {
        for _ in 0..<max(0, contacts) {
            let number = nextID + 1
            _ = addContact(name: "Contact \(number)", email: "contact\(number)@example.com", log: &log)
        }
        for _ in 0..<max(0, count) {
            _ = addTask(name: "Task \(nextID + 1)", due: nil, log: &log)
        }
    }
}
