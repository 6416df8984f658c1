import Foundation

// What the documentation's examples share that is not Depot's. Every ```swift
// block of README.md and of the DocC articles is in one of the files beside
// this one, and DocumentationTests checks that the text there is the text of
// the docs. Each type an article's example uses is defined in that article's
// file (and shown in the article) or in the file of the article it links to.

/// What a pull-to-refresh control offers (UIKit's `UIRefreshControl`), so the
/// examples read like an app and still build on Linux.
@MainActor final class RefreshControl {
    private(set) var isRefreshing = true
    func endRefreshing() { isRefreshing = false }
}
