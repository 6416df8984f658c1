import CLITestSupport
import Testing

/// The `depot-server` executable's arguments, run as a user runs it.
@Suite(.timeLimit(.minutes(2)))
struct CommandLineTests {
    /// Bad numbers are one clear sentence, exit 64, before anything binds.
    @Test func badArgumentsAreRefusedInOneSentence() async throws {
        try await Executables.refuses("depot-server", [
            (["--port", "99999"], "--port must be between 0 and 65535"),
            (["--port", "-1"], "--port must be between 0 and 65535"),
            (["--latency", "-1"], "--latency must be between 0 and 600000 milliseconds"),
            (["--bandwidth", "0"], "--bandwidth must be between 1 and 10000000 kbit/s"),
            (["--initial-posts", "999999"], "--initial-posts must be between 0 and 20000"),
            (["--post-interval", "0"], "--post-interval must be between 1 and 86400 seconds"),
            (["--fail-rate", "2"], "--fail-rate must be between 0 and 1"),
            (["--token-lifetime", "0"], "--token-lifetime must be between 0.1 and 31536000 seconds"),
            (["--token-lifetime", "nan"], "--token-lifetime must be between 0.1 and 31536000 seconds"),
            (["--seed", "-1"], "The value '-1' is invalid for '--seed <seed>'"),
        ])
    }
}
