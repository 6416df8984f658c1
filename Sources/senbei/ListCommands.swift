import ArgumentParser
import Depot
import Foundation
import SenbeiKit

/// What the five list subcommands share: a page, from the cache when fresh.
protocol ListSubcommand: AsyncParsableCommand {
    static var kind: EntityKind { get }
    var options: ServerOptions { get }
    var page: Int { get }
    var refresh: Bool { get }
}

extension CommandConfiguration {
    /// The configuration of the list subcommand for `kind`.
    static func list(_ kind: EntityKind) -> CommandConfiguration {
        CommandConfiguration(
            commandName: kind.rawValue,
            abstract: "List \(kind.rawValue), a page at a time (from the cache when it is younger than five minutes).")
    }
}

/// The contacts and leads lists also scroll: `--more` shows every page
/// loaded so far and loads the next, from where the last run stopped.
protocol ScrollingListSubcommand: ListSubcommand {
    var more: Bool { get }
}

extension ScrollingListSubcommand {
    @MainActor
    func scroll() async throws {
        guard more else { return try await list() }
        // Scrolling goes on from where the last run stopped: a page number would be ignored.
        guard page == 1 else { throw ValidationError("--more goes on from the pages loaded so far and takes no --page") }
        try await Session.run(options) { session in
            // Pages are data work, held until a sign-in; with no server to
            // ask, the pages loaded before are shown as they are.
            var unreachable: DepotError?
            do {
                _ = try await session.withLogin { try await session.app.login() }
            } catch let error as DepotError where [.offline, .connectionLost, .timedOut].contains(error.code) {
                unreachable = error
            }
            let list = try session.app.pagedList(Self.kind, policy: .cacheOnly)
            if unreachable == nil {
                if refresh || list.pageCount == 0 { await list.refresh() } else { await list.loadNextPage() }
            }
            try list.results.performFetch()
            if let error = list.pageError, error.code == .unauthorized { throw error }
            let states = try await session.app.states(of: list.fetchedObjects)
            session.print(SenbeiPresentation.scrollLines(
                Self.kind, rows: list.fetchedObjects, pageCount: list.pageCount, hasMore: list.hasMore, error: unreachable ?? list.pageError, states: states))
        }
    }
}

extension CommandConfiguration {
    /// The configuration of the contacts or leads subcommand, which also scrolls.
    static func scrollingList(_ kind: EntityKind) -> CommandConfiguration {
        CommandConfiguration(
            commandName: kind.rawValue,
            abstract: "List \(kind.rawValue), a page at a time (from the cache when it is younger than five minutes), or as one growing list with --more.",
            discussion: """
                senbei \(kind.rawValue) --more shows the \(kind.rawValue) loaded so far as one list and loads the next page; \
                run it again to load more, add --refresh to start again from page 1. The pages loaded stay in the cache: \
                offline, --more shows them and says more are on the server.
                """)
    }
}

extension ListSubcommand {
    @MainActor
    func list() async throws {
        guard page >= 1 else { throw ValidationError("--page must be at least 1") }
        try await Session.run(options) { session in
            let result = try await session.withLogin { () async throws(DepotError) in
                try await session.app.loadPage(Self.kind, page: page, refresh: refresh)
            }
            session.print(SenbeiPresentation.pageLines(result, now: Date()))
        }
    }
}

struct AccountsCommand: ListSubcommand {
    static let kind = EntityKind.accounts
    static let configuration = CommandConfiguration.list(.accounts)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh.") var refresh = false
    @MainActor func run() async throws { try await list() }
}

struct ContactsCommand: ScrollingListSubcommand {
    static let kind = EntityKind.contacts
    static let configuration = CommandConfiguration.scrollingList(.contacts)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh; with --more, start again from page 1.") var refresh = false
    @Flag(help: "Load more: show every page loaded so far and the next one (a later run goes on from there).") var more = false
    @MainActor func run() async throws { try await scroll() }
}

struct LeadsCommand: ScrollingListSubcommand {
    static let kind = EntityKind.leads
    static let configuration = CommandConfiguration.scrollingList(.leads)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh; with --more, start again from page 1.") var refresh = false
    @Flag(help: "Load more: show every page loaded so far and the next one (a later run goes on from there).") var more = false
    @MainActor func run() async throws { try await scroll() }
}

struct OpportunitiesCommand: ListSubcommand {
    static let kind = EntityKind.opportunities
    static let configuration = CommandConfiguration.list(.opportunities)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh.") var refresh = false
    @MainActor func run() async throws { try await list() }
}

struct CampaignsCommand: ListSubcommand {
    static let kind = EntityKind.campaigns
    static let configuration = CommandConfiguration.list(.campaigns)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh.") var refresh = false
    @MainActor func run() async throws { try await list() }
}
