import Depot
import DepotAsyncHTTPClient
import Foundation
import TextLayout

/// What the example apps' command-line front ends share: where their cache
/// lives and which transport they use.
public enum ExampleSupport {
    /// The cache file, its folder created: `path` when given, otherwise
    /// `$XDG_CACHE_HOME/<app>/cache.sqlite` or `~/.cache/<app>/cache.sqlite`.
    public static func cacheFile(app: String, path: String?) throws -> URL {
        let file: URL
        if let path {
            file = URL(fileURLWithPath: path)
        } else {
            let environment = ProcessInfo.processInfo.environment
            let base = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
                ?? FileManager.default.homeDirectoryForCurrentUser.appending(path: ".cache")
            file = base.appending(path: "\(app)/cache.sqlite")
        }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        return file
    }

    /// Writes `lines` to `handle` (standard output by default), each made
    /// safe for a terminal first (``TextLayout/terminalSafe(_:)``): the one
    /// way the command-line apps print text that came from the network.
    public static func write(_ lines: [String], to handle: FileHandle = .standardOutput) {
        handle.write(Data((lines.map(TextLayout.terminalSafe).joined(separator: "\n") + "\n").utf8))
    }

    /// The longest any transfer of a one-shot command (`--once`, `--post`, a
    /// senbei subcommand) may take: a server that drips its body cannot hold
    /// a script for longer.
    public static let oneShotTransferLimit: Duration = .seconds(60)

    /// The transport for live runs: AsyncHTTPClient on Linux, where it is the
    /// faster one (BENCHMARKS.md), URLSession elsewhere.
    public static func liveTransport() -> any Transport {
        #if os(Linux)
        AsyncHTTPClientTransport()
        #else
        URLSessionTransport()
        #endif
    }
}
