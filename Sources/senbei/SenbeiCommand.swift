// senbei: a Fat Free CRM-like client built on Depot (MVC-N).
//
// The view layer (this target) prints what SenbeiKit reads from the cache;
// SenbeiKit's operations fill the cache. With no --server it starts the
// embedded depot-server on 127.0.0.1, so it needs no internet.
import ArgumentParser
import DemoServer
import Depot
import DepotStore
import ExampleSupport
import Foundation
import SenbeiKit
import SyncStatusText

@main
struct SenbeiCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "senbei",
        abstract: "A small CRM client built on Depot: accounts, contacts, leads, opportunities, campaigns, tasks and comments.",
        discussion: """
            With no --server, it starts the embedded depot-server on 127.0.0.1 (user admin, password secret); \
            the embedded server forgets changes when senbei exits. It signs in at the server's /oauth/token \
            with the user name and password, and sends the bearer token it gets (kept in memory only, \
            renewed before it expires). Lists come from the cache while it is \
            younger than five minutes; senbei contacts --more (and leads --more) shows one growing list instead, \
            a page more each run, from where the last run stopped. Changes (new-task, done, comment, uncomment, new-contact, \
            edit-contact, delete-contact) are stored in the cache's outbox first: offline they show in the lists, marked ◌, \
            and go out on a later run (senbei outbox lists them). An edit carries the contact's version: another user's change \
            to other fields is merged, one to the same field is kept as a conflict (marked ⚠; senbei conflicts lists and resolves them). senbei watch prints others' contact and task changes as they happen \
            (--json: one object per line); the interactive search shows them at once. With no subcommand, it opens the \
            interactive contact search.
            """,
        subcommands: [
            SearchCommand.self, LoginCommand.self,
            AccountsCommand.self, ContactsCommand.self, LeadsCommand.self, OpportunitiesCommand.self, CampaignsCommand.self,
            CommentsCommand.self, CommentCommand.self, UncommentCommand.self,
            TasksCommand.self, DoneCommand.self, NewTaskCommand.self, NewContactCommand.self, EditContactCommand.self, DeleteContactCommand.self,
            ConflictsCommand.self, ActivitiesCommand.self,
            OutboxCommand.self, WatchCommand.self,
        ],
        defaultSubcommand: SearchCommand.self)
}

/// The options every subcommand takes: where the server is, who signs in, where the cache is.
struct ServerOptions: ParsableArguments {
    @Option(help: "The Senbei server's base URL (default: start the embedded depot-server on 127.0.0.1).")
    var server: String?

    @Option(help: "The user name to sign in with.")
    var user = "admin"

    @Option(help: "The password to sign in with.")
    var password = "secret"

    @Option(help: "The cache file (default: $XDG_CACHE_HOME/senbei/cache.sqlite or ~/.cache/senbei/cache.sqlite).")
    var cache: String?
}

/// A failure told in one sentence: printed on standard error, exit status 1.
struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// Exit status 1 for a failure already told (a refused change, printed
    /// with what it was when the session ends).
    static let alreadyTold = Failure("")
}

/// One run of senbei: the server (embedded or given), the store, the controller
/// and the app, torn down in order whatever happens.
@MainActor
struct Session {
    let app: SenbeiApp
    let serverURL: URL

    /// Builds a session, runs `body`, and shuts everything down. A failure
    /// is printed as one sentence on standard error and exits with status 1.
    /// Changes the server refused during the run (queued by an earlier one)
    /// are printed on standard error, one sentence each, when it ends.
    ///
    /// - Parameter sending: Whether to send what earlier runs queued
    ///   (`senbei outbox` looks at the queue as it is).
    static func run(_ options: ServerOptions, sending: Bool = true, _ body: @MainActor (Session) async throws -> Void) async throws {
        let store: Store
        do {
            store = try ExampleSupport.openCache(
                app: "senbei", path: options.cache, migrator: SenbeiSchema.migrator,
                keeping: [.table(RejectedChange.databaseTableName)])
        } catch {
            throw ExampleSupport.tell(error, app: "senbei", while: .opening, cacheFile: options.cache)
        }

        var embedded: DemoServer?
        let serverURL: URL
        if let server = options.server {
            guard let url = URL(string: server), url.scheme != nil, url.host != nil else { throw ValidationError("--server needs an absolute URL, such as http://127.0.0.1:8080") }
            serverURL = url
        } else {
            do {
                let started = try await DemoServer.start(.init(port: 0, epoch: Date()))
                embedded = started
                serverURL = started.baseURL
            } catch {
                throw Failure("Cannot start the embedded depot-server (\(error)); give --server URL.")
            }
        }

        let credentials = SenbeiCredentials(username: options.user, password: options.password)
        var configuration = SenbeiApp.configuration(server: serverURL, transport: ExampleSupport.liveTransport(), store: store, notificationCenter: nil)
        configuration.limits.longestTransfer = ExampleSupport.oneShotTransferLimit
        let controller = NetworkController(configuration: configuration)
        var failure: (any Error)?
        var app: SenbeiApp?
        do {
            let session = Session(app: try SenbeiApp(controller: controller, credentials: credentials, notificationCenter: NotificationCenter()), serverURL: serverURL)
            app = session.app
            if sending { try await session.app.start() }
            try await body(session)
        } catch {
            failure = error
        }
        if let app {
            _ = await app.shutdown(grace: .seconds(5))
            await tellRejectedChanges(app)
        } else {
            _ = await controller.shutdown(grace: .seconds(5))
        }
        await embedded?.stop()
        switch failure {
        case nil:
            return
        case let error as Failure where error.description.isEmpty:
            throw ExitCode.failure
        case let error as DepotError:
            printError(SenbeiPresentation.message(for: error, server: serverURL, cacheFile: options.cache))
            throw ExitCode.failure
        case let error as Failure:
            printError(error.description)
            throw ExitCode.failure
        case let error?:
            throw error
        }
    }

    /// Runs `work`; when the server refuses the user name or password, asks
    /// for new ones on a terminal (three tries) and runs it again. Without a
    /// terminal, the refusal ends the run. A session the server ended (it
    /// refused to renew the token) is signed in again once with the same
    /// credentials, without asking.
    func withLogin<T>(_ work: @MainActor () async throws -> T) async throws -> T {
        var tries = 0
        var signedInAgain = false
        while true {
            let refusal: DepotError
            do {
                return try await work()
            } catch let error as DepotError where error.code == .unauthorized {
                refusal = error
            }
            if !SenbeiApp.isRefusedSignIn(refusal), !signedInAgain {
                // `work` signs in first when nobody is signed in.
                signedInAgain = true
                continue
            }
            tries += 1
            guard Prompt.isAvailable, tries < 3 else {
                guard SenbeiApp.isRefusedSignIn(refusal) else { throw refusal }
                throw Failure("Login failed: the server refused user \"\(app.username)\" with that password; try --user and --password.")
            }
            printError(SenbeiPresentation.message(for: refusal))
            let user = await Prompt.ask("User: ") ?? ""
            let password = await Prompt.ask("Password: ", secret: true) ?? ""
            let outcome: DepotError?
            do {
                try await app.login(username: user, password: password)
                outcome = nil
            } catch {
                outcome = error
            }
            if let outcome, outcome.code != .unauthorized { throw outcome }
        }
    }

    /// Queues a change with `make`; when the cache cannot store it (a full
    /// disk, say), ends the run saying that `what` was not saved: nothing was
    /// queued, and nothing will be sent.
    func store<Record>(_ what: String, _ make: () async throws(DepotError) -> QueuedChange<Record>) async throws -> QueuedChange<Record> {
        let change: QueuedChange<Record>
        do {
            change = try await make()
        } catch {
            guard error.storageProblem != nil || error.code == .storage else { throw error }
            throw Failure(SenbeiPresentation.message(for: error, while: .saving(what)))
        }
        return change
    }

    /// Waits for `change`'s answer (signing in first) and prints what became of
    /// it: `sent`'s line, or that it is queued (`what` names it).
    func finish<Record>(_ change: QueuedChange<Record>, queued what: String, sent: (Record) -> String) async throws {
        switch try await withLogin({ try await app.outcome(of: change) }) {
        case .sent(let record):
            print([sent(record)])
        case .queued(let entry):
            // An edit that met another user's change waits for the user, not the network.
            if let conflict = try await app.conflicts().first(where: { $0.id == entry }) {
                let whose = conflict.record.map { "\($0.kind) #\($0.id)" } ?? "the record"
                let happened = conflict.isDeletedOnServer ? "\(whose) was deleted on the server" : "someone else changed \(whose) first"
                print(["\(what) was not sent: \(happened), so it is kept as a conflict."] + SenbeiPresentation.conflictLines([conflict]))
            } else {
                print([SenbeiPresentation.queuedLine(what, entry: entry)])
            }
        }
    }

    /// Prints the changes the server refused after they were queued, once.
    private static func tellRejectedChanges(_ app: SenbeiApp) async {
        guard let rejected = try? await app.rejectedChanges(), !rejected.isEmpty else { return }
        for change in rejected { printError(SenbeiPresentation.rejectionLine(change)) }
        try? await app.dismissRejectedChanges(rejected)
    }

    /// Prints `lines` on standard output.
    func print(_ lines: [String]) {
        ExampleSupport.write(lines)
    }
}

/// Prints `text` on standard error, prefixed with `senbei: `.
func printError(_ text: String) {
    ExampleSupport.write(["senbei: \(text)"], to: .standardError)
}
