#if os(Linux)
import CLITestSupport
import Foundation
import Testing

/// The child-process helper every command-line test uses, where tests run in parallel.
@Suite struct SpawnTests {
    /// A pipe a test reads from must not reach children other tests spawn
    /// meanwhile: one that did kept a timeline test waiting for the fuzz
    /// smoke run to end (its 120 s time limit passed first).
    @Test func aCapturePipeIsNotInheritedByOtherChildren() async throws {
        // Given a capture pipe open in this process, as another test's would be
        let fds = try closeOnExecPipe()
        defer { fds.forEach { close($0) } }

        // When another child starts, it does not hold either end
        let child = try await spawn("/bin/ls", ["-1", "/proc/self/fd"])
        let inherited = Set(child.output.split(separator: "\n").compactMap { Int32($0) })
        #expect(child.status == 0)
        #expect(inherited.isDisjoint(with: fds), "the child holds \(inherited.intersection(fds)) of the pipe \(fds)")
        // And the child's own output still came through its own pipe
        #expect(inherited.isSuperset(of: [0, 1, 2]))
    }
}
#endif
