import ArgumentParser
import Depot
import ExampleSupport
import Foundation
import SenbeiKit

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "login", abstract: "Sign in and show who you are.")
    @OptionGroup var options: ServerOptions

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let profile = try await session.withLogin { try await session.app.login() }
            session.print(["Signed in to \(session.serverURL.absoluteString) as \(profile.name) (\(profile.username), \(profile.email))."])
        }
    }
}

struct SearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search contacts by name or e-mail.",
        discussion: "With no query, in a terminal, opens the interactive search: type to search, results follow as you type; escape quits (q quits too while the query is empty).")
    @OptionGroup var options: ServerOptions
    @Argument(help: "What to look for; leave it out for the interactive search.") var query: String?

    @MainActor func run() async throws {
        if query == nil, !Terminal.isInteractive {
            throw ValidationError("give a query (senbei search ann), or run senbei search in a terminal for the interactive search")
        }
        try await Session.run(options) { session in
            try await session.withLogin { _ = try await session.app.login() }
            let search = ContactSearch(app: session.app)
            guard let query else {
                // Others' new contacts reach the results at once while the search is open.
                let watch = session.app.live.watch()
                defer { watch.cancel() }
                await SearchView(app: session.app, search: search).run()
                return
            }
            search.update(query: query)
            await search.settled()
            if let error = search.lastError { throw error }
            session.print(search.matches.map(SenbeiPresentation.searchLines) ?? ["Nothing to search for."])
        }
    }
}

/// `--contact ID` and its siblings: the record comments are about.
struct SubjectOptions: ParsableArguments {
    @Option(help: "A contact's id.") var contact: Int?
    @Option(help: "An account's id.") var account: Int?
    @Option(help: "A lead's id.") var lead: Int?
    @Option(help: "An opportunity's id.") var opportunity: Int?
    @Option(help: "A campaign's id.") var campaign: Int?

    var subject: Commentable? {
        let given: [(EntityKind, Int?)] = [(.contacts, contact), (.accounts, account), (.leads, lead), (.opportunities, opportunity), (.campaigns, campaign)]
        let chosen = given.compactMap { kind, id in id.map { Commentable(kind, $0) } }
        return chosen.count == 1 ? chosen.first : nil
    }

    func validate() throws {
        guard subject != nil else { throw ValidationError("name one record: --contact ID, --account ID, --lead ID, --opportunity ID or --campaign ID") }
    }
}

struct CommentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "comments", abstract: "List the comments on a record.")
    @OptionGroup var options: ServerOptions
    @OptionGroup var about: SubjectOptions

    @MainActor func run() async throws {
        guard let subject = about.subject else { return }
        try await Session.run(options) { session in
            let comments = try await session.withLogin { try await session.app.loadComments(on: subject) }
            session.print(SenbeiPresentation.lines(comments, now: Date()) { SenbeiPresentation.commentLines($0, on: subject) })
        }
    }
}

struct CommentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "comment", abstract: "Post a comment on a record.")
    @OptionGroup var options: ServerOptions
    @OptionGroup var about: SubjectOptions
    @Argument(help: "What to say.") var text: String

    @MainActor func run() async throws {
        guard let subject = about.subject else { return }
        try await Session.run(options) { session in
            let change = try await session.store("the comment") { () async throws(DepotError) in try await session.app.postComment(on: subject, text: text) }
            try await session.finish(change, queued: "Comment on \(subject)") { comment in
                "Posted comment #\(comment.id) on \(subject)."
            }
        }
    }
}

struct UncommentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "uncomment", abstract: "Delete a comment.")
    @OptionGroup var options: ServerOptions
    @Argument(help: "The comment's id.") var id: Int

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let change = try await session.store("the deletion of comment #\(id)") { () async throws(DepotError) in try await session.app.deleteComment(id: id) }
            try await session.finish(change, queued: "Deleting comment #\(id)") { _ in "Deleted comment #\(id)." }
        }
    }
}

struct TasksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tasks", abstract: "List open tasks: overdue, due ASAP, today, tomorrow, this week, next week, later.")
    @OptionGroup var options: ServerOptions

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let tasks = try await session.withLogin { try await session.app.loadTasks() }
            let now = Date()
            session.print(SenbeiPresentation.lines(tasks, now: now) { SenbeiPresentation.taskLines(TaskBuckets().group($0, now: now)) })
        }
    }
}

struct DoneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "done", abstract: "Mark a task as done.")
    @OptionGroup var options: ServerOptions
    @Argument(help: "The task's id.") var id: Int

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let change = try await session.store("the task's new state") { () async throws(DepotError) in try await session.app.markTaskDone(id: id) }
            try await session.finish(change, queued: "Done for task #\(id)") { task in "Done: #\(task.id) \(task.name)." }
        }
    }
}

struct NewTaskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "new-task", abstract: "Create a task (due as soon as possible without --due).")
    @OptionGroup var options: ServerOptions
    @Argument(help: "What to do.") var name: String
    @Option(help: "The day it is due, yyyy-MM-dd.") var due: String?

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let change = try await session.store("the task") { () async throws(DepotError) in try await session.app.createTask(name: name, due: due) }
            try await session.finish(change, queued: "Task \"\(name)\"") { task in
                "Created task #\(task.id) \(task.name)" + (task.due.map { ", due \($0)." } ?? ", due as soon as possible.")
            }
        }
    }
}

struct NewContactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "new-contact", abstract: "Create a contact.")
    @OptionGroup var options: ServerOptions
    @Argument(help: "The contact's name.") var name: String
    @Option(help: "The contact's e-mail address.") var email: String?

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let change = try await session.store("the contact") { () async throws(DepotError) in try await session.app.createContact(name: name, email: email) }
            try await session.finish(change, queued: "Contact \"\(name)\"") { contact in "Created contact #\(contact.id) \(contact.name)." }
        }
    }
}

struct ActivitiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "activities", abstract: "Show what happened lately, newest first.")
    @OptionGroup var options: ServerOptions

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let activities = try await session.withLogin { try await session.app.loadActivities() }
            session.print(SenbeiPresentation.lines(activities, now: Date()) { SenbeiPresentation.activityLines($0) })
        }
    }
}
