import Foundation

extension Trace {
    /// How ``Trace/svg(_:)`` draws the waterfall.
    public struct SVGOptions: Sendable, Hashable {
        /// The picture's width in pixels.
        public var width: Int
        /// Operation names are written beside their rows when there are at most this many rows.
        public var maximumLabelledRows: Int
        /// The tallest the rows part may grow, in pixels; rows get thinner to fit (never under 2 px).
        public var maximumRowsHeight: Int

        /// Makes options.
        ///
        /// - Parameters:
        ///   - width: The width in pixels (1200).
        ///   - maximumLabelledRows: Rows named up to this count (40).
        ///   - maximumRowsHeight: The rows' height budget in pixels (800).
        public init(width: Int = 1200, maximumLabelledRows: Int = 40, maximumRowsHeight: Int = 800) {
            self.width = max(400, width)
            self.maximumLabelledRows = maximumLabelledRows
            self.maximumRowsHeight = max(100, maximumRowsHeight)
        }

        /// 1200 px wide, names up to 40 rows, rows within 800 px.
        public static let `default` = SVGOptions()
    }

    /// The colour of a priority's bars.
    static func color(of priority: Priority) -> String {
        switch priority {
        case .veryHigh: return "#6a3d9a"
        case .high: return "#1f77b4"
        case .normal: return "#17a589"
        case .low: return "#e67e22"
        case .veryLow: return "#95a5a6"
        }
    }

    /// The colour of a quality in the quality band.
    static func color(of quality: ConnectionQuality?) -> String {
        switch quality {
        case nil: return "#e5e5e5"
        case .offline?: return "#34495e"
        case .poor?: return "#e74c3c"
        case .moderate?: return "#f5b041"
        case .good?: return "#a9dfbf"
        case .excellent?: return "#27ae60"
        }
    }

    /// Draws the trace as a self-contained SVG waterfall, like a browser's network panel.
    ///
    /// One row per operation in enqueue order: a light bar while it waited in the
    /// queue, a solid bar (coloured by priority) while it ran, a dark tick at its
    /// first byte, a red cap if it failed and a faded bar with a black cap if it
    /// was cancelled. A band above the rows shows the connection quality over
    /// time; a time axis runs below. Rows thin out to fit large traces, and only
    /// small traces get names. Hovering a row shows its details.
    ///
    /// For example:
    ///
    /// ```swift
    /// let svg = trace.svg(.init(width: 1600))
    /// ```
    ///
    /// - Parameter options: Size and labelling.
    public func svg(_ options: SVGOptions = .default) -> String {
        let rows = entries.sorted { ($0.enqueued, $0.id) < ($1.enqueued, $1.id) }
        let labelled = rows.count <= options.maximumLabelledRows
        let rowHeight = max(2.0, min(18.0, Double(options.maximumRowsHeight) / Double(max(rows.count, 1))))
        let barHeight = max(1.5, (rowHeight * 0.7).rounded())
        let left = labelled ? 190.0 : 64.0
        let right = 24.0
        let chartWidth = Double(options.width) - left - right
        let legendTop = 34.0
        let bandTop = 92.0
        let bandHeight = 10.0
        let rowsTop = bandTop + bandHeight + 10
        let rowsHeight = Double(rows.count) * rowHeight
        let axisTop = rowsTop + rowsHeight + 4
        let height = axisTop + 30

        var latest = end
        for entry in rows {
            latest = max(latest, entry.enqueued, entry.started ?? .zero, entry.finished ?? .zero, entry.firstByte ?? .zero)
        }
        for change in qualityChanges { latest = max(latest, change.at) }
        let span = max(latest.seconds, 0.001)
        let tick = Self.tickStep(for: span)
        let scaleEnd = (span / tick).rounded(.up) * tick
        func x(_ time: Duration) -> Double { left + time.seconds / scaleEnd * chartWidth }

        var svg = SVGWriter()
        svg.open(width: options.width, height: Int(height.rounded(.up)))
        svg.line("<style>text{font-family:-apple-system,Helvetica,Arial,sans-serif;fill:#333}.small{font-size:11px}.title{font-size:14px;font-weight:600}</style>")
        svg.line("<rect x=\"0\" y=\"0\" width=\"\(options.width)\" height=\"\(Self.f(height))\" fill=\"#ffffff\"/>")

        // Title and legend.
        let failures = rows.filter { if case .failed? = $0.outcome { return true } else { return false } }.count
        let cancels = rows.filter { $0.outcome == .cancelled }.count
        svg.text(x: 12, y: 20, "Depot trace — \(rows.count) operations, \(Self.seconds(span)), \(failures) failed, \(cancels) cancelled", cssClass: "title")
        var legendX = 12.0
        svg.text(x: legendX, y: legendTop + 11, "priority:", cssClass: "small")
        legendX += 52
        for priority in Priority.allCases.reversed() {
            svg.line("<rect x=\"\(Self.f(legendX))\" y=\"\(Self.f(legendTop + 2))\" width=\"14\" height=\"10\" fill=\"\(Self.color(of: priority))\"/>")
            svg.text(x: legendX + 18, y: legendTop + 11, priority.description, cssClass: "small")
            legendX += 24 + Double(priority.description.count) * 6.5
        }
        legendX += 12
        svg.line("<rect x=\"\(Self.f(legendX))\" y=\"\(Self.f(legendTop + 2))\" width=\"14\" height=\"10\" fill=\"#17a589\" fill-opacity=\"0.25\"/>")
        svg.text(x: legendX + 18, y: legendTop + 11, "queued", cssClass: "small")
        legendX += 66
        svg.line("<rect x=\"\(Self.f(legendX + 6))\" y=\"\(Self.f(legendTop))\" width=\"2\" height=\"14\" fill=\"#111\"/>")
        svg.text(x: legendX + 14, y: legendTop + 11, "first byte", cssClass: "small")
        legendX += 78
        svg.line("<rect x=\"\(Self.f(legendX))\" y=\"\(Self.f(legendTop + 2))\" width=\"14\" height=\"10\" fill=\"#17a589\"/><rect x=\"\(Self.f(legendX + 11))\" y=\"\(Self.f(legendTop))\" width=\"4\" height=\"14\" fill=\"#d00000\"/>")
        svg.text(x: legendX + 20, y: legendTop + 11, "failed", cssClass: "small")
        legendX += 62
        svg.line("<rect x=\"\(Self.f(legendX))\" y=\"\(Self.f(legendTop + 2))\" width=\"14\" height=\"10\" fill=\"#17a589\" fill-opacity=\"0.4\"/><rect x=\"\(Self.f(legendX + 11))\" y=\"\(Self.f(legendTop))\" width=\"3\" height=\"14\" fill=\"#000\"/>")
        svg.text(x: legendX + 20, y: legendTop + 11, "cancelled", cssClass: "small")

        legendX = 12
        let qualityLegendTop = legendTop + 22
        svg.text(x: legendX, y: qualityLegendTop + 11, "quality:", cssClass: "small")
        legendX += 52
        for quality in ConnectionQuality.allCases {
            svg.line("<rect x=\"\(Self.f(legendX))\" y=\"\(Self.f(qualityLegendTop + 2))\" width=\"14\" height=\"10\" fill=\"\(Self.color(of: quality))\"/>")
            svg.text(x: legendX + 18, y: qualityLegendTop + 11, quality.description, cssClass: "small")
            legendX += 26 + Double(quality.description.count) * 6.5
        }

        // Grid and time axis.
        var t = 0.0
        while t <= scaleEnd + tick / 2 {
            let gx = left + t / scaleEnd * chartWidth
            svg.line("<line x1=\"\(Self.f(gx))\" y1=\"\(Self.f(bandTop))\" x2=\"\(Self.f(gx))\" y2=\"\(Self.f(axisTop))\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>")
            svg.text(x: gx, y: axisTop + 16, Self.seconds(t), cssClass: "small", anchor: "middle")
            t += tick
        }
        svg.line("<line x1=\"\(Self.f(left))\" y1=\"\(Self.f(axisTop))\" x2=\"\(Self.f(left + chartWidth))\" y2=\"\(Self.f(axisTop))\" stroke=\"#999\" stroke-width=\"1\"/>")

        // Quality band: grey until the first change.
        svg.text(x: left - 6, y: bandTop + 9, "quality", cssClass: "small", anchor: "end")
        let changes = qualityChanges.sorted { $0.at < $1.at }
        var bandStart: Duration = .zero
        var bandQuality: ConnectionQuality? = nil
        for change in changes + [QualityChange(at: .seconds(scaleEnd), quality: .offline)] {
            let x0 = x(bandStart)
            let x1 = x(min(change.at, .seconds(scaleEnd)))
            if x1 > x0 {
                svg.line("<rect class=\"quality\" x=\"\(Self.f(x0))\" y=\"\(Self.f(bandTop))\" width=\"\(Self.f(x1 - x0))\" height=\"\(Self.f(bandHeight))\" fill=\"\(Self.color(of: bandQuality))\"><title>\(bandQuality?.description ?? "unknown") from \(Self.seconds(bandStart.seconds))</title></rect>")
            }
            bandStart = change.at
            bandQuality = change.quality
        }

        // Rows.
        for (index, entry) in rows.enumerated() {
            let top = rowsTop + Double(index) * rowHeight
            let barTop = top + (rowHeight - barHeight) / 2
            let color = Self.color(of: entry.priority)
            svg.line("<g>")
            svg.line("<title>\(SVGWriter.escape(Self.tooltip(entry)))</title>")
            if rowHeight >= 8, index % 2 == 1 {
                svg.line("<rect x=\"\(Self.f(left))\" y=\"\(Self.f(top))\" width=\"\(Self.f(chartWidth))\" height=\"\(Self.f(rowHeight))\" fill=\"#f6f6f6\"/>")
            }
            if labelled {
                svg.text(x: left - 6, y: top + rowHeight / 2 + 4, Self.label(entry), cssClass: "small", anchor: "end")
            }
            let endOfRow = entry.finished ?? .seconds(span)
            let queuedEnd = entry.started ?? endOfRow
            let q0 = x(entry.enqueued)
            let q1 = max(x(queuedEnd), q0 + 1)
            svg.line("<rect class=\"queued\" x=\"\(Self.f(q0))\" y=\"\(Self.f(barTop))\" width=\"\(Self.f(q1 - q0))\" height=\"\(Self.f(barHeight))\" fill=\"\(color)\" fill-opacity=\"0.25\"/>")
            if let started = entry.started {
                let a0 = x(started)
                let a1 = max(x(endOfRow), a0 + 1.5)
                let opacity = entry.outcome == .cancelled ? "0.4" : (entry.outcome == nil ? "0.7" : "1")
                svg.line("<rect class=\"active\" x=\"\(Self.f(a0))\" y=\"\(Self.f(barTop))\" width=\"\(Self.f(a1 - a0))\" height=\"\(Self.f(barHeight))\" fill=\"\(color)\" fill-opacity=\"\(opacity)\"/>")
                if let firstByte = entry.firstByte {
                    svg.line("<rect class=\"first-byte\" x=\"\(Self.f(x(firstByte) - 0.75))\" y=\"\(Self.f(top))\" width=\"1.5\" height=\"\(Self.f(rowHeight))\" fill=\"#111\"/>")
                }
                if entry.attempts > 1, labelled {
                    svg.text(x: a1 + 4, y: top + rowHeight / 2 + 4, "×\(entry.attempts)", cssClass: "small")
                }
            }
            let capX = x(endOfRow)
            switch entry.outcome {
            case .failed?:
                svg.line("<rect class=\"failed\" x=\"\(Self.f(capX - 2))\" y=\"\(Self.f(top))\" width=\"4\" height=\"\(Self.f(rowHeight))\" fill=\"#d00000\"/>")
            case .cancelled?:
                svg.line("<rect class=\"cancelled\" x=\"\(Self.f(capX - 1.5))\" y=\"\(Self.f(top))\" width=\"3\" height=\"\(Self.f(rowHeight))\" fill=\"#000\"/>")
            default:
                break
            }
            svg.line("</g>")
        }
        svg.close()
        return svg.output
    }

    private static func label(_ entry: Entry) -> String {
        let name = entry.name.count > 26 ? entry.name.prefix(25) + "…" : Substring(entry.name)
        return "\(name) #\(entry.id)"
    }

    private static func tooltip(_ entry: Entry) -> String {
        var parts = ["\(entry.name) #\(entry.id)", "\(entry.priority), \(entry.category)", "enqueued \(seconds(entry.enqueued.seconds))"]
        if let started = entry.started { parts.append("started \(seconds(started.seconds))") }
        if let firstByte = entry.firstByte { parts.append("first byte \(seconds(firstByte.seconds))") }
        if let finished = entry.finished { parts.append("finished \(seconds(finished.seconds))") }
        parts.append("\(entry.bytes) bytes")
        if entry.attempts > 1 { parts.append("\(entry.attempts) attempts") }
        parts.append(entry.outcome?.description ?? "running")
        return parts.joined(separator: " · ")
    }

    /// A 1-2-5 step that gives about ten ticks over `span` seconds.
    static func tickStep(for span: Double) -> Double {
        let raw = span / 10
        let magnitude = pow(10, (log10(raw)).rounded(.down))
        for factor in [1.0, 2.0, 5.0, 10.0] where raw <= factor * magnitude {
            return factor * magnitude
        }
        return 10 * magnitude
    }

    static func seconds(_ value: Double) -> String {
        if value == 0 { return "0" }
        if value < 1 { return "\(Int((value * 1000).rounded())) ms" }
        let text = String(format: "%.2f", value)
        let trimmed = text.contains(".") ? text.replacingOccurrences(of: "0+$", with: "", options: .regularExpression).replacingOccurrences(of: "\\.$", with: "", options: .regularExpression) : text
        return "\(trimmed) s"
    }

    static func f(_ value: Double) -> String {
        String(format: "%.1f", value)
    }
}

/// Builds SVG text line by line.
struct SVGWriter {
    var output = ""

    mutating func open(width: Int, height: Int) {
        output += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        output += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\">\n"
    }

    mutating func close() { output += "</svg>\n" }

    mutating func line(_ text: String) {
        output += text
        output += "\n"
    }

    mutating func text(x: Double, y: Double, _ content: String, cssClass: String, anchor: String = "start") {
        line("<text class=\"\(cssClass)\" x=\"\(Trace.f(x))\" y=\"\(Trace.f(y))\" text-anchor=\"\(anchor)\">\(Self.escape(content))</text>")
    }

    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }
}
