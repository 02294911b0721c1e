import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// A JSON document signed by a machine of the fleet, as etcd holds every value that carries
/// authority (membership entries, join requests, shared credentials, refresh intents):
/// `{"body": "<JSON text>", "signature": "<base64 Ed25519>"}`. The signature covers the body's
/// bytes exactly as stored, so no canonical form is needed; the body says who signed it.
///
/// Opening checks only the shape: the caller decides whose key must have signed (a member of the
/// verified membership, or the requester itself for a join request).
package struct SignedDocument: Sendable {
    /// The body's bytes as signed.
    package let body: [UInt8]
    package let signature: [UInt8]
    /// The body, parsed.
    package let fields: JSONFields

    /// The largest value accepted from etcd (a sealed credential is a few KiB).
    static let maximumSize = 256 * 1024

    /// Signs `body` with `key`.
    package static func sign(_ body: JSONValue, with key: Ed25519.SigningKey) -> [UInt8] {
        let text = Array(body.serialized().utf8)
        let envelope = JSONValue.object([
            "body": .string(String(decoding: text, as: UTF8.self)),
            "signature": .string(Data(key.sign(text)).base64EncodedString()),
        ])
        return Array(envelope.serialized().utf8)
    }

    /// Parses a signed document read from etcd key `key`; `kind` is the body's `type`.
    /// Throws ``FleetError/corrupt(key:detail:)`` naming what is wrong.
    package init(_ bytes: [UInt8], key: String, kind: String) throws(FleetError) {
        guard bytes.count <= Self.maximumSize else {
            throw .corrupt(key: key, detail: "the value is \(bytes.count) bytes, over the \(Self.maximumSize) limit")
        }
        do {
            let envelope = try JSONFields(try JSONValue.parse(Data(bytes)))
            body = Array(try envelope.string("body").utf8)
            guard let signature = Data(base64Encoded: try envelope.string("signature")),
                signature.count == Ed25519.signatureBytes
            else {
                throw FleetError.corrupt(key: key, detail: "its signature is not 64 bytes of base64")
            }
            self.signature = Array(signature)
            fields = try JSONFields(try JSONValue.parse(Data(body)), path: ".body")
        } catch let error as FleetError {
            throw error
        } catch {
            throw .corrupt(key: key, detail: "it is not a signed document (\(error.userFacingDescription))")
        }
        let type: String
        do { type = try fields.string("type") } catch { throw .corrupt(key: key, detail: error.userFacingDescription) }
        guard type == kind else {
            throw .corrupt(key: key, detail: "it is a \(TerminalText.escaped(type)), not a \(kind)")
        }
    }

    /// Whether the holder of `signingKey` (base64) signed it.
    package func isSigned(by signingKey: String) -> Bool {
        guard let key = Data(base64Encoded: signingKey) else { return false }
        return Ed25519.verify(signature: signature, message: body, publicKey: Array(key))
    }

    /// SHA-256 of the body, hex: what the next membership entry links to and the pin holds.
    package var digest: String { hexString(SHA256.digest(body)) }
}

extension JSONFields {
    /// A machine name read from etcd: a valid slot-shaped name, else an error naming the field.
    func machineName(_ key: String) throws(JSONShapeError) -> String {
        let name = try string(key)
        guard (try? Slot(name)) != nil else {
            throw JSONShapeError(path: path + "." + key, problem: "is not a machine name")
        }
        return name
    }

    /// A 64-bit counter written as a decimal string (JSON numbers lose precision past 2^53).
    func counter(_ key: String) throws(JSONShapeError) -> Int64 {
        guard let n = Int64(try string(key)), n >= 0 else {
            throw JSONShapeError(path: path + "." + key, problem: "is not a non-negative counter")
        }
        return n
    }
}
