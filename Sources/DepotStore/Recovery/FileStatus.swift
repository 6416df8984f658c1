#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `stat(2)` says of one path: a store's open asks it four times.
/// `FileManager`'s attributes also look up the names of the file's owner and
/// group, which took a quarter of `Store(path:)`'s own time in a warm process.
struct FileStatus {
    /// The length in bytes.
    let size: Int64
    /// The permission bits (`st_mode & 0o7777`).
    let permissions: mode_t

    /// `nil` if there is no such file, or it cannot be looked at.
    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        size = Int64(info.st_size)
        permissions = info.st_mode & 0o7777
    }
}
