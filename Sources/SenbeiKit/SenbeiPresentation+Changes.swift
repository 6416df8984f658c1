import Foundation

/// How `senbei watch` shows each change of the CRM's live feed: a line for a
/// person, or one JSON object per line for a script.
extension SenbeiPresentation {
    /// One change, on one line:
    ///
    /// ```
    /// contact #10041  Zoe Quinn  zoe@example.com
    /// task    #10042  Call Zoe (due 2030-01-02)
    /// task    #3      Email Bob Silva  ✓ done
    /// ```
    ///
    /// The text is the server's: print it through a terminal-safe writer.
    public static func changeLine(_ change: CRMChange) -> String {
        switch change {
        case .contact(let contact):
            return ("contact " + pad("#\(contact.id)", 8) + contact.name + (contact.email.map { "  " + $0 } ?? "")).trimmingTrailingSpaces
        case .task(let task):
            let due = task.due.map { " (due \($0))" } ?? ""
            return "task    " + pad("#\(task.id)", 8) + task.name + due + (task.completed ? "  ✓ done" : "")
        case .contactDeleted(let id):
            return "contact " + pad("#\(id)", 8) + "deleted"
        case .taskDeleted(let id):
            return "task    " + pad("#\(id)", 8) + "deleted"
        }
    }

    /// One change as one line of JSON, members in a fixed order, for example
    /// `{"change":"contact","id":10041,"name":"Zoe Quinn","email":"zoe@example.com","company":null}`,
    /// `{"change":"task","id":10042,"name":"Call Zoe","due":null,"completed":false}` or
    /// `{"change":"delete-task","id":3}`.
    ///
    /// The text is exact: JSON escapes the C0 controls, and this escapes the
    /// C1 controls and the bidi controls too (`\u009b`, `\u202e`), so the line
    /// holds nothing a terminal would act on and decodes to the server's text.
    public static func changeJSON(_ change: CRMChange) -> String {
        let members: [(String, JSONValue)] = switch change {
        case .contact(let contact):
            [("change", .string("contact")), ("id", .int(contact.id)), ("name", .string(contact.name)),
             ("email", .optional(contact.email)), ("company", .optional(contact.company))]
        case .task(let task):
            [("change", .string("task")), ("id", .int(task.id)), ("name", .string(task.name)),
             ("due", .optional(task.due)), ("completed", .bool(task.completed))]
        case .contactDeleted(let id):
            [("change", .string("delete-contact")), ("id", .int(id))]
        case .taskDeleted(let id):
            [("change", .string("delete-task")), ("id", .int(id))]
        }
        return "{" + members.map { "\(jsonString($0.0)):\($0.1.json)" }.joined(separator: ",") + "}"
    }

    private enum JSONValue {
        case string(String), int(Int), bool(Bool), null

        static func optional(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }

        var json: String {
            switch self {
            case .string(let text): SenbeiPresentation.jsonString(text)
            case .int(let number): String(number)
            case .bool(let flag): flag ? "true" : "false"
            case .null: "null"
            }
        }
    }

    /// `text` as a JSON string, with every control a terminal acts on escaped.
    static func jsonString(_ text: String) -> String {
        var json = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            default:
                switch scalar.value {
                case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069:
                    let hex = String(scalar.value, radix: 16)
                    json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default:
                    json.unicodeScalars.append(scalar)
                }
            }
        }
        return json + "\""
    }
}
