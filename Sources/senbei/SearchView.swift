import Depot
import ExampleSupport
import Foundation
import TextLayout
import Observation
import SenbeiKit

/// The interactive contact search: every key updates the query, the search
/// before is cancelled, and the screen is redrawn when ``ContactSearch``
/// changes. It reads only the search's state; it never sees a response.
@MainActor
final class SearchView {
    enum Event: Sendable {
        case key(Terminal.Key)
        case changed
        case ended
    }

    private let app: SenbeiApp
    private let search: ContactSearch

    init(app: SenbeiApp, search: ContactSearch) {
        self.app = app
        self.search = search
    }

    func run() async {
        let terminal = Terminal()
        defer { terminal.restore() }
        let (events, sink) = AsyncStream<Event>.makeStream()
        let keys = terminal.keys()
        let feeder = Task {
            for await key in keys { sink.yield(.key(key)) }
            sink.yield(.ended)
        }
        defer { feeder.cancel() }

        observe(sink)
        draw(terminal)
        for await event in events {
            switch event {
            case .ended:
                return
            case .changed:
                observe(sink)
            case .key(let key):
                guard handle(key) else { return }
            }
            draw(terminal)
        }
    }

    /// Asks for one `.changed` event at the next change of what the screen shows.
    private func observe(_ sink: AsyncStream<Event>.Continuation) {
        withObservationTracking {
            _ = (search.query, search.matches, search.isSearching, search.lastError)
        } onChange: {
            sink.yield(.changed)
        }
    }

    /// Returns `false` to quit.
    private func handle(_ key: Terminal.Key) -> Bool {
        switch key {
        case .escape, .interrupt, .character("\u{04}"):
            return false
        case .character("q") where search.query.isEmpty:
            return false
        case .backspace:
            search.deleteBackward()
        case .character(let character) where !character.isNewline && character.asciiValue.map({ $0 >= 0x20 }) ?? true:
            search.type(character)
        default:
            break
        }
        return true
    }

    private func draw(_ terminal: Terminal) {
        let (width, height) = terminal.size
        var lines: [String] = []
        let who = app.profile.map { " · signed in as \($0.name)" } ?? ""
        lines.append(fit("Senbei · contact search\(who)", width))
        lines.append(String(repeating: "─", count: width))
        lines.append(fit("Search: \(search.query)█", width))
        lines.append(fit(status, width))
        lines.append("")
        let rows = search.contacts.map { "  " + SenbeiPresentation.entityLine($0) }
        lines += rows.prefix(max(0, height - 8)).map { fit($0, width) }
        while lines.count < height - 2 { lines.append("") }
        lines.append(String(repeating: "─", count: width))
        lines.append(fit("type to search · backspace deletes · esc quits (q too, while empty)", width))
        terminal.draw(lines)
    }

    private var status: String {
        if let error = search.lastError { return SenbeiPresentation.message(for: error) }
        if search.query.trimmingCharacters(in: .whitespaces).isEmpty { return "Type a name or an e-mail address." }
        if search.isSearching { return "searching \"\(search.query)\"…" }
        guard let matches = search.matches else { return "" }
        return SenbeiPresentation.searchLines(matches).first ?? ""
    }

    /// `text` made safe for the terminal (names come from the server), cut to `width`.
    private func fit(_ text: String, _ width: Int) -> String {
        let text = TextLayout.terminalSafe(text)
        return text.count <= width ? text : String(text.prefix(max(0, width - 1))) + "…"
    }
}
