import CLibXML2
import Foundation

/// What ``XMLStream`` tells as it reads a document, in document order, on the
/// thread that called ``XMLStream/parse(_:)``.
protocol XMLStreamHandler: AnyObject {
    /// An element starts. `prefix` is the one written in the document, if any;
    /// attribute names are qualified as written (`xml:base`, `rdf:about`), and
    /// namespace declarations are not among them.
    func startElement(_ name: XMLStream.Name, attributes: [String: String], stream: XMLStream)
    /// Text or CDATA of the current element, as UTF-8; one run of text may come in several calls.
    func characters(_ text: String)
    /// An element ends.
    func endElement(_ name: XMLStream.Name, stream: XMLStream)
    /// An entity reference the document does not declare, in text. What the
    /// handler adds to its text stands for it; the parser adds nothing.
    func undeclaredEntity(_ name: String)
}

/// A streaming XML reader on libxml2's SAX2 push parser, fed in chunks, for
/// documents of any size (libxml2's 10,000,000-byte limit is on one chunk).
///
/// Why not Foundation's `XMLParser`, which wraps the same libxml2: on Linux it
/// leaks the text of every error libxml2 reports (a fuzzer ran out of memory
/// on it), traps on names that are not UTF-8 and on `<?pi?>`, reads on past
/// fatal errors, and makes dictionaries and strings for every event. Here:
///
/// - names come from libxml2's dictionary and are turned into `String`s once
///   per distinct name (a few hundred at most are kept);
/// - errors are copied as code, line and column, and only the first error
///   counts; a fatal error stops the parser (no recovery mode);
/// - entities: the five predefined ones and character references are
///   decoded; an entity the document declares in its DTD is never looked up,
///   so a reference to it is an undeclared entity, as it was with
///   `XMLParser` (libxml2 2.9 does not bound the expansion of entities in a
///   SAX parser: billion laughs and quadratic blowup ran for minutes). Undeclared
///   references go to ``XMLStreamHandler/undeclaredEntity(_:)``; nothing is
///   ever loaded from outside the document (`XML_PARSE_NONET`, no resolver,
///   no DTD read).
///
/// One instance reads one document on one thread.
final class XMLStream {
    /// An element's name: its namespace URI (empty without one), local name
    /// and the prefix the document wrote.
    struct Name {
        var namespace: String
        var localName: String
        var prefix: String?

        /// `prefix:localName`, or the local name.
        var qualified: String { prefix.map { "\($0):\(localName)" } ?? localName }
    }

    /// A libxml2 error: its number (`xmlParserErrors`), where it happened and its text.
    struct Failure: Error, CustomStringConvertible {
        var code: Int
        var line: Int
        var column: Int
        var message: String

        var description: String { "libxml2 error \(code) at line \(line), column \(column): \(message)" }
    }

    /// How many bytes go to libxml2 at a time.
    static let chunkSize = 128 * 1024
    /// The most distinct names turned into strings and kept; past it, names are made per event.
    static let mostKeptNames = 512

    private unowned let handler: any XMLStreamHandler
    private var context: xmlParserCtxtPtr?
    /// Strings for libxml2's dictionary entries (names and namespace URIs), by address.
    private var names: [UnsafeRawPointer: String] = [:]
    /// The first error that was not a warning.
    private(set) var firstError: Failure?
    /// Whether ``stop()`` was called.
    private(set) var stopped = false

    init(handler: any XMLStreamHandler) {
        self.handler = handler
    }

    /// Stops the parse after the current event: no more events come. Call it from a handler.
    func stop() {
        stopped = true
        if let context { xmlStopParser(context) }
    }

    /// Reads `data` to its end, a fatal error or ``stop()``.
    ///
    /// - Returns: The first error libxml2 reported that is not a warning, or
    ///   `nil` for a well-formed document (or one read up to ``stop()``).
    func parse(_ data: Data) -> Failure? {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Failure? in
            let bytes = raw.bindMemory(to: CChar.self)
            // The first bytes tell libxml2 the encoding (a byte order mark or the declaration).
            let head = min(4, bytes.count)
            if let failure = begin(UnsafeBufferPointer(rebasing: bytes[..<head])) { return failure }
            push(UnsafeBufferPointer(rebasing: bytes[head...]))
            return end()
        }
    }

    /// Whether more bytes would be read: not stopped, and no fatal error yet.
    var isReading: Bool {
        guard let context else { return false }
        return !stopped && context.pointee.disableSAX == 0
    }

    /// Starts an incremental read; `head` is the document's first bytes (4 are
    /// enough for libxml2 to tell the encoding from a byte order mark or the
    /// declaration). Then ``push(_:)`` the rest as it comes, and ``end()``.
    ///
    /// - Returns: A failure if libxml2 could not make a parser.
    func begin(_ head: UnsafeBufferPointer<CChar>) -> Failure? {
        precondition(context == nil, "an XMLStream reads one document")
        var sax = Self.makeHandlerTable()
        // The callbacks' user data is this stream, not the parser: with the
        // parser as its user data, libxml2 looks an entity up in the DTD
        // itself when getEntity finds none, and so expands what a document
        // declares (it keeps declarations even with no entityDecl callback).
        let owner = Unmanaged.passUnretained(self).toOpaque()
        guard let context = xmlCreatePushParserCtxt(&sax, owner, head.baseAddress, Int32(head.count), nil) else {
            return Failure(code: 2, line: 0, column: 0, message: "libxml2 could not make a parser")
        }
        self.context = context
        xmlCtxtUseOptions(context, Int32(XML_PARSE_NONET.rawValue))
        return nil
    }

    /// Reads the next bytes of the document, in chunks of at most ``chunkSize``.
    /// Does nothing once the read has stopped or failed.
    func push(_ bytes: UnsafeBufferPointer<CChar>) {
        guard let context, let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count, isReading {
            let length = min(Self.chunkSize, bytes.count - offset)
            xmlParseChunk(context, base + offset, Int32(length), 0)
            offset += length
        }
    }

    /// Ends the document and frees the parser.
    ///
    /// - Returns: The first error libxml2 reported that is not a warning, or
    ///   `nil` for a well-formed document (or one read up to ``stop()``).
    func end() -> Failure? {
        guard let context else { return firstError }
        defer { release() }
        if isReading {
            xmlParseChunk(context, nil, 0, 1)
        }
        if stopped { return nil }
        if let firstError { return firstError }
        if context.pointee.wellFormed == 0 {
            // An error libxml2 did not report through the handler.
            return Failure(code: Int(context.pointee.errNo), line: Int(xmlSAX2GetLineNumber(context)),
                           column: Int(xmlSAX2GetColumnNumber(context)), message: "the document is not well-formed")
        }
        return nil
    }

    private func release() {
        guard let context else { return }
        // No callback makes a document, but libxml2 makes one to keep a DTD's entity declarations in.
        if let document = context.pointee.myDoc {
            xmlFreeDoc(document)
            context.pointee.myDoc = nil
        }
        xmlFreeParserCtxt(context)
        self.context = nil
    }

    deinit {
        release()
    }

    // MARK: - Events

    /// The string for a name from libxml2's dictionary.
    private func string(_ pointer: UnsafePointer<xmlChar>) -> String {
        let key = UnsafeRawPointer(pointer)
        if let known = names[key] { return known }
        let made = String(cString: pointer)
        if names.count < Self.mostKeptNames { names[key] = made }
        return made
    }

    private func name(_ localName: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?, _ uri: UnsafePointer<xmlChar>?) -> Name {
        Name(namespace: uri.map(string) ?? "", localName: localName.map(string) ?? "", prefix: prefix.map(string))
    }

    /// The stream behind a callback's user data.
    private static func stream(_ owner: UnsafeMutableRawPointer?) -> XMLStream? {
        owner.map { Unmanaged<XMLStream>.fromOpaque($0).takeUnretainedValue() }
    }

    /// libxml2's SAX2 handler with every tree-building callback replaced or
    /// removed: no node is ever made.
    private static func makeHandlerTable() -> xmlSAXHandler {
        var table = xmlSAXHandler()
        xmlSAXVersion(&table, 2)
        table.startElementNs = { owner, localName, prefix, uri, _, _, attributeCount, _, attributes in
            guard let stream = XMLStream.stream(owner), !stream.stopped else { return }
            var values: [String: String] = [:]
            if attributeCount > 0, let attributes {
                // Five pointers each: local name, prefix, URI, value start, value end.
                for index in 0..<Int(attributeCount) {
                    let base = index * 5
                    guard let local = attributes[base], let start = attributes[base + 3], let end = attributes[base + 4] else { continue }
                    var key = stream.string(local)
                    if let prefix = attributes[base + 1] { key = stream.string(prefix) + ":" + key }
                    values[key] = String(decoding: UnsafeBufferPointer(start: start, count: end - start), as: UTF8.self)
                }
            }
            stream.handler.startElement(stream.name(localName, prefix, uri), attributes: values, stream: stream)
        }
        table.endElementNs = { owner, localName, prefix, uri in
            guard let stream = XMLStream.stream(owner), !stream.stopped else { return }
            stream.handler.endElement(stream.name(localName, prefix, uri), stream: stream)
        }
        let characters: charactersSAXFunc = { owner, text, length in
            guard let stream = XMLStream.stream(owner), !stream.stopped, let text, length > 0 else { return }
            stream.handler.characters(String(decoding: UnsafeBufferPointer(start: text, count: Int(length)), as: UTF8.self))
        }
        table.characters = characters
        table.ignorableWhitespace = characters
        table.cdataBlock = characters
        table.getEntity = { owner, name in
            guard let name else { return nil }
            if let entity = xmlGetPredefinedEntity(name) { return entity }
            if let stream = XMLStream.stream(owner), !stream.stopped, let parser = stream.context,
               parser.pointee.inSubset == 0, parser.pointee.instate == XML_PARSER_CONTENT {
                stream.handler.undeclaredEntity(String(cString: name))
            }
            return nil
        }
        table.getParameterEntity = { _, _ in nil }
        // No document node: nothing a DTD declares is used.
        table.startDocument = nil
        table.endDocument = nil
        table.internalSubset = nil
        table.entityDecl = nil
        table.attributeDecl = nil
        table.elementDecl = nil
        table.notationDecl = nil
        table.unparsedEntityDecl = nil
        // Never a node for these, and never a load from outside the document.
        table.startElement = nil
        table.endElement = nil
        table.reference = nil
        table.comment = nil
        table.processingInstruction = nil
        table.externalSubset = nil
        table.resolveEntity = nil
        table.setDocumentLocator = nil
        // Errors come here, not to libxml2's per-thread handler or stderr:
        // a parser's own structured handler takes precedence over both.
        table.serror = onError
        return table
    }

    private static let onError: xmlStructuredErrorFunc = { owner, error in
        guard let stream = XMLStream.stream(owner), let error else { return }
        let code = Int(error.pointee.code)
        // A warning, or an entity undeclared where a DTD that is not read
        // could declare it (RSS 0.91's HTML entities): not a malformed document.
        guard error.pointee.level != XML_ERR_WARNING, code != Int(XML_WAR_UNDECLARED_ENTITY.rawValue), stream.firstError == nil else { return }
        let message = error.pointee.message.map { String(cString: $0) } ?? ""
        stream.firstError = Failure(code: code, line: Int(error.pointee.line), column: Int(error.pointee.int2),
                                    message: message.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
