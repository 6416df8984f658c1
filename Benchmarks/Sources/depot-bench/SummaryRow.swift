#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// One row of BENCHMARKS.md's table, `| figure | command | target | latest |
/// commit | date |`. Every subcommand ends by printing one for each figure it
/// measures, so that a reader can paste them over the table's lines.
///
/// The figure is named as in the table, the value formatted as there; the
/// command, commit and date come from this run.
///
/// For example:
///
/// ```swift
/// SummaryRow.print([
///     SummaryRow("ingest: the same, plain `CachingOperation` vs raw", target: "≥ 0.8× raw",
///                "\(SummaryRow.times(ratio)) (0.626 s)", met: ratio >= 0.8),
/// ])
/// // | ingest: the same, … | `depot-bench ingest 100000 3` | ≥ 0.8× raw | 0.97× (0.626 s); met | 34d78e9 | 2026-11-27 |
/// ```
struct SummaryRow: Sendable {
    /// The row's name in the table.
    var figure: String
    /// What the figure should reach, or `nil` where the table has none.
    var target: String?
    /// The measured value, as the table writes it.
    var latest: String
    /// Whether the target was reached (`nil` without a target).
    var met: Bool?

    /// Makes a row.
    ///
    /// - Parameters:
    ///   - figure: The row's name in BENCHMARKS.md.
    ///   - target: The target, or `nil` for none (printed as `–`).
    ///   - latest: The value.
    ///   - met: Whether the value reaches the target; "; met" or "; not met" is appended.
    init(_ figure: String, target: String? = nil, _ latest: String, met: Bool? = nil) {
        (self.figure, self.target, self.latest, self.met) = (figure, target, latest, met)
    }

    /// The Markdown line.
    var line: String {
        let value = met.map { latest + ($0 ? "; met" : "; not met") } ?? latest
        return "| \(figure) | `\(Self.run.command)` | \(target ?? "–") | \(value) | \(Self.run.commit) | \(Self.run.date) |"
    }

    /// Prints `rows` under a heading, at the end of a run.
    static func print(_ rows: [SummaryRow]) {
        guard !rows.isEmpty else { return }
        fflush(nil)  // first what the run wrote with `print`
        say("\nBENCHMARKS.md rows:")
        for row in rows { say(row.line) }
    }
}

// MARK: - The run

extension SummaryRow {
    /// How this run was started and on which source tree.
    struct Run: Sendable {
        /// `depot-bench` and its arguments, after the environment variables that change what is measured.
        var command: String
        /// `git rev-parse --short HEAD`, `+dirty` with uncommitted changes, or `unknown`.
        var commit: String
        /// Today in UTC, `YYYY-MM-DD`.
        var date: String
    }

    /// Read once, the first time it is used: `main` does that before the
    /// subcommand starts, as `conditions docs` rewrites files of the tree.
    static let run = Run(command: command(), commit: commit(), date: date())

    /// Variables that only this program sets, for the process it starts again.
    static let internalVariables: Set<String> = [RealLinkBench.insideVariable]

    /// The command as run: the variables that select or change a figure
    /// (`DEPOT_…`, `FIRSTROWS_…`, `MALLOC_ARENA_MAX`, `GLIBC_TUNABLES`), then `depot-bench` and its arguments.
    static func command(arguments: [String] = CommandLine.arguments, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let settings = environment
            .filter { name, _ in (name.hasPrefix("DEPOT_") || name.hasPrefix("FIRSTROWS_") || name == "MALLOC_ARENA_MAX" || name == "GLIBC_TUNABLES") && !internalVariables.contains(name) }
            .sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }
        return (settings + ["depot-bench"] + arguments.dropFirst()).joined(separator: " ")
    }

    /// The source tree this binary was built from: its short commit, with
    /// `+dirty` when `git status --porcelain` lists anything; `unknown` without git.
    static func commit(in folder: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path) -> String {
        guard let head = git(["rev-parse", "--short", "HEAD"], in: folder), !head.isEmpty,
              let status = git(["status", "--porcelain"], in: folder)
        else { return "unknown" }
        return status.isEmpty ? head : head + "+dirty"
    }

    /// git's output, trimmed; `nil` when git is missing or fails.
    static func git(_ arguments: [String], in folder: String) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", folder] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = nil  // `allocations` preloads its malloc counter
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `YYYY-MM-DD` in UTC.
    static func date(_ now: Date = Date()) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: now)
    }
}

// MARK: - Values as the table writes them

extension SummaryRow {
    /// `+4.3`, `−4.0`: always signed, with the table's minus sign.
    static func signed(_ value: Double, digits: Int = 1) -> String {
        String(format: "%+.\(digits)f", value).replacingOccurrences(of: "-", with: "−")
    }

    /// `+4.3%`, `−16.1%`.
    static func percent(_ value: Double, digits: Int = 1) -> String {
        signed(value, digits: digits) + "%"
    }

    /// `1.38×`, `49.3×`, `120×`: two decimals below 10, one below 100.
    static func times(_ value: Double) -> String {
        String(format: "%.\(value < 10 ? 2 : value < 100 ? 1 : 0)f×", value)
    }

    /// `8,590`: rounded, thousands separated by commas.
    static func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()).magnitude)
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return (value.rounded() < 0 ? "−" : "") + text
    }

    /// `0.7–2.1`: a range with the table's en dash, one value when both ends round alike.
    static func range(_ values: [Double], digits: Int = 1) -> String {
        let low = String(format: "%.\(digits)f", values.min() ?? .nan)
        let high = String(format: "%.\(digits)f", values.max() ?? .nan)
        return low == high ? low : "\(low)–\(high)"
    }
}
