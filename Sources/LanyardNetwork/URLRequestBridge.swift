import Foundation
import LanyardAuth
import LanyardCore

// On Linux URLRequest, HTTPURLResponse and URLSession live in FoundationNetworking. This is the one
// module that imports it, and it re-exports it, so programs that import LanyardKit can build
// URLRequests for `Client.send` without a `#if canImport(FoundationNetworking)` of their own.
#if canImport(FoundationNetworking)
@_exported import FoundationNetworking
#endif

extension HTTPRequest {
    /// The same request as Lanyard's transport value.
    /// - Throws: `ClientError.invalidResponse` when the request has no URL.
    package init(_ request: URLRequest) throws {
        guard let url = request.url else { throw ClientError.invalidResponse("the request has no URL") }
        var headers: [String: String] = [:]
        for (k, v) in request.allHTTPHeaderFields ?? [:] { headers[k] = v }
        self.init(method: request.httpMethod ?? "GET", url: url, headers: headers, body: request.httpBody)
    }
}

extension HTTPResponse {
    /// The answer as Foundation's response type, for the request to `url`.
    package func urlResponse(for url: URL) throws -> HTTPURLResponse {
        guard let http = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)
        else {
            throw ClientError.invalidResponse("could not build the HTTP response")
        }
        return http
    }
}
