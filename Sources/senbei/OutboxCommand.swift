import ArgumentParser
import Depot
import DepotStore
import Foundation
import SenbeiKit

/// `senbei outbox`: the changes waiting to be sent (or stopped with an error),
/// and `--retry ID` / `--discard ID` for one of them. It looks at the queue as
/// it is: nothing else is sent meanwhile.
struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "List the changes waiting to be sent or that failed (id, type, lane, attempts, last error).",
        discussion: "--retry ID sends one again now; --discard ID removes one and undoes its change in the cache.")
    @OptionGroup var options: ServerOptions
    @Option(help: ArgumentHelp("Send this entry again now.", valueName: "id")) var retry: String?
    @Option(help: ArgumentHelp("Remove this entry and undo its change in the cache.", valueName: "id")) var discard: String?

    @MainActor func run() async throws {
        let action: Action
        switch (retry, discard) {
        case (nil, nil):
            action = .list
        case (let text?, nil):
            action = .retry(try Self.number(text, option: "--retry"))
        case (nil, let text?):
            action = .discard(try Self.number(text, option: "--discard"))
        case (.some, .some):
            throw Self.badArgument("give either --retry ID or --discard ID, not both.")
        }
        try await Session.run(options, sending: false) { session in
            switch action {
            case .list:
                session.print(SenbeiPresentation.outboxLines(try await session.app.outbox.entries()))
            case .retry(let number):
                try await Self.retry(number, in: session)
            case .discard(let number):
                let entry = try await Self.entry(number, in: session)
                try await session.app.outbox.discard(entry.id)
                session.print(["Discarded outbox entry \(entry.id) (\(entry.typeName)); its change was undone in the cache."])
            }
        }
    }

    private enum Action {
        case list
        case retry(Int64)
        case discard(Int64)
    }

    /// Sends the entry again, signing in first, and says what became of it.
    @MainActor
    private static func retry(_ number: Int64, in session: Session) async throws {
        let entry = try await entry(number, in: session)
        let change = try await session.app.retry(entry.id)
        let outcome: ChangeOutcome<NetworkResponse>
        do {
            outcome = try await session.withLogin { try await session.app.outcome(of: change) }
        } catch let error as DepotError where (400..<500).contains(error.status ?? 0) {
            // Refused and rolled back: the session's end tells it, with what the change was.
            throw Failure.alreadyTold
        } catch let error as DepotError where error.code == .decoding {
            let reason = try await session.app.outbox.entries().first { $0.id == entry.id }?.lastError ?? "\(error)"
            throw Failure("Outbox entry \(entry.id) failed again: \(reason); senbei outbox --discard \(number) removes it.")
        }
        switch outcome {
        case .sent:
            session.print(["Sent outbox entry \(entry.id) (\(entry.typeName))."])
        case .queued:
            session.print(["Outbox entry \(entry.id) (\(entry.typeName)) is still queued: it will be sent when online."])
        }
    }

    /// The entry numbered `number`, or the sentence that says there is none.
    @MainActor
    private static func entry(_ number: Int64, in session: Session) async throws -> OutboxEntry {
        guard let entry = try await session.app.outbox.entries().first(where: { $0.id.rawValue == number }) else {
            throw Failure("There is no outbox entry #\(number); senbei outbox lists them.")
        }
        return entry
    }

    /// `3` or `#3`; anything else ends the run with one sentence.
    private static func number(_ text: String, option: String) throws -> Int64 {
        let digits = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard let number = Int64(digits), number > 0 else {
            throw badArgument("\(option) takes an outbox entry number, such as 3 (senbei outbox lists them), not \"\(text)\".")
        }
        return number
    }

    /// Prints `sentence` as senbei's error and returns exit status 1 to throw.
    private static func badArgument(_ sentence: String) -> ExitCode {
        printError(sentence.prefix(1).uppercased() + sentence.dropFirst())
        return ExitCode.failure
    }
}
