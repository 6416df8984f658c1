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

struct ContactsCommand: ListSubcommand {
    static let kind = EntityKind.contacts
    static let configuration = CommandConfiguration.list(.contacts)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh.") var refresh = false
    @MainActor func run() async throws { try await list() }
}

struct LeadsCommand: ListSubcommand {
    static let kind = EntityKind.leads
    static let configuration = CommandConfiguration.list(.leads)
    @OptionGroup var options: ServerOptions
    @Option(parsing: .unconditional, help: "The page, from 1.") var page = 1
    @Flag(help: "Ask the server even when the cache is fresh.") var refresh = false
    @MainActor func run() async throws { try await list() }
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
