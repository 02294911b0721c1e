// `lanyard tray`'s StatusNotifierItem and dbusmenu (CStatusNotifier) behind a Swift API.

import CStatusNotifier
import Glibc
import LanyardGLib
import LanyardSupport

/// One entry of the exported menu. Ids are positive and unique; `parent` 0 is the top level.
package struct StatusNotifierMenuEntry: Sendable, Equatable {
    /// How an entry shows a state of its own.
    package enum Toggle: Sendable, Equatable {
        case radio(on: Bool)
        case checkmark(on: Bool)
    }

    package var id: Int32
    package var parent: Int32
    /// The label as dbusmenu reads it (`_` marks a mnemonic: callers double literal ones).
    package var label: String
    package var toggle: Toggle?
    package var enabled: Bool
    package var isSeparator: Bool
    /// An icon beside the label as a PNG (dbusmenu's `icon-data`); empty for none.
    package var iconPNG: [UInt8]

    package init(
        id: Int32,
        parent: Int32 = 0,
        label: String,
        toggle: Toggle? = nil,
        enabled: Bool = true,
        isSeparator: Bool = false,
        iconPNG: [UInt8] = []
    ) {
        self.id = id
        self.parent = parent
        self.label = label
        self.toggle = toggle
        self.enabled = enabled
        self.isSeparator = isSeparator
        self.iconPNG = iconPNG
    }
}

/// One size of an icon as pixels.
package struct StatusNotifierPixmap: Sendable, Equatable {
    package var width: Int32
    package var height: Int32
    /// `width` × `height` ARGB32 values, each in network byte order (A, R, G, B), row by row.
    package var argb: [UInt8]

    package init(width: Int32, height: Int32, argb: [UInt8]) {
        precondition(argb.count == Int(width) * Int(height) * 4, "a pixmap has 4 bytes a pixel")
        self.width = width
        self.height = height
        self.argb = argb
    }
}

/// What the item itself shows.
package struct StatusNotifierLook: Sendable, Equatable {
    /// "Active", "Passive" or "NeedsAttention".
    package var status: String
    /// A themed icon name; empty for none (hosts then draw `pixmaps`, which they otherwise
    /// ignore for the name).
    package var iconName: String
    /// The icon as pixels (IconPixmap).
    package var pixmaps: [StatusNotifierPixmap]
    package var title: String
    package var tooltipTitle: String
    package var tooltipBody: String
    /// Text beside the icon where the host shows one (Ayatana's `XAyatanaLabel`); empty for none.
    package var label: String
    /// The widest text `label` takes (`XAyatanaLabelGuide`), so the host keeps room for it.
    package var labelGuide: String

    package init(
        status: String,
        iconName: String,
        pixmaps: [StatusNotifierPixmap] = [],
        title: String,
        tooltipTitle: String,
        tooltipBody: String,
        label: String = "",
        labelGuide: String = ""
    ) {
        self.status = status
        self.iconName = iconName
        self.pixmaps = pixmaps
        self.title = title
        self.tooltipTitle = tooltipTitle
        self.tooltipBody = tooltipBody
        self.label = label
        self.labelGuide = labelGuide
    }
}

/// What the desktop did.
package enum StatusNotifierEvent: Sendable, Equatable {
    /// A menu entry was chosen ("clicked").
    case clicked(Int32)
    /// The host is about to show the menu (AboutToShow).
    case menuOpened
    /// A StatusNotifierWatcher accepted the item (after each start of a watcher).
    case registered
}

/// The item could not be put on the bus.
package struct StatusNotifierFailure: Error, Sendable, CustomStringConvertible {
    package let description: String
}

/// A StatusNotifierItem at /StatusNotifierItem with its menu at /MenuBar, owning `busName` and
/// registering with every `org.kde.StatusNotifierWatcher` that appears. GDBus serves it from a
/// GLib main loop on a thread of its own; `events` reports what the desktop does.
/// `@unchecked`: the C object is thread-safe (updates are handed to its loop), and `stop` is
/// called once, by the owner.
package final class StatusNotifier: @unchecked Sendable {
    private let handle: OpaquePointer
    private let sink: Sink
    /// Every click, menu opening and registration, in order.
    package let events: AsyncStream<StatusNotifierEvent>

    /// Keeps the stream's continuation alive for the C callbacks (which get it unretained).
    private final class Sink: Sendable {
        let continuation: AsyncStream<StatusNotifierEvent>.Continuation
        init(_ continuation: AsyncStream<StatusNotifierEvent>.Continuation) { self.continuation = continuation }
    }

    /// Loads GLib and GIO (first use), connects to the session bus and exports the item.
    package init(busName: String, itemID: String) throws(StatusNotifierFailure) {
        if let reason = LazyLibraries.desktopLoadFailure() { throw StatusNotifierFailure(description: reason) }
        let (events, continuation) = AsyncStream<StatusNotifierEvent>.makeStream(bufferingPolicy: .unbounded)
        let sink = Sink(continuation)
        var message = [CChar](repeating: 0, count: 512)
        let onEvent: lanyard_menu_event_fn = { context, id, event in
            let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
            switch event.map({ String(cString: $0) }) {
            case "clicked": sink.continuation.yield(.clicked(id))
            case "opened": sink.continuation.yield(.menuOpened)
            default: break  // hovered and the like
            }
        }
        let onRegistered: lanyard_registered_fn = { context in
            Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue().continuation.yield(.registered)
        }
        guard
            let handle = lanyard_status_notifier_start(
                busName,
                itemID,
                onEvent,
                onRegistered,
                Unmanaged.passUnretained(sink).toOpaque(),
                &message,
                Int32(message.count)
            )
        else {
            throw StatusNotifierFailure(description: String(nulTerminated: message))
        }
        self.handle = handle
        self.sink = sink
        self.events = events
    }

    /// Replaces the menu and the look; hosts hear LayoutUpdated, NewIcon, NewToolTip, NewStatus.
    package func update(_ entries: [StatusNotifierMenuEntry], look: StatusNotifierLook) {
        // Every C string lives until the call returns (the C side copies them).
        var strings: [UnsafeMutablePointer<CChar>] = []
        func keep(_ text: String?) -> UnsafePointer<CChar>? {
            guard let text else { return nil }
            let copy = strdup(text)!
            strings.append(copy)
            return UnsafePointer(copy)
        }
        defer { for pointer in strings { free(pointer) } }
        // The row icons, like the strings, only have to last the call (the C side copies them).
        var icons: [UnsafeMutableBufferPointer<UInt8>] = []
        defer { for icon in icons { icon.deallocate() } }
        let items = entries.map { entry in
            var toggleType: String?
            var state: Int32 = -1
            switch entry.toggle {
            case .radio(let on):
                toggleType = "radio"
                state = on ? 1 : 0
            case .checkmark(let on):
                toggleType = "checkmark"
                state = on ? 1 : 0
            case nil: break
            }
            var icon: UnsafePointer<UInt8>?
            if !entry.iconPNG.isEmpty {
                let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: entry.iconPNG.count)
                _ = buffer.initialize(from: entry.iconPNG)
                icons.append(buffer)
                icon = UnsafePointer(buffer.baseAddress)
            }
            return lanyard_menu_item(
                id: entry.id,
                parent: entry.parent,
                label: keep(entry.label),
                toggle_type: keep(toggleType),
                toggle_state: state,
                enabled: entry.enabled ? 1 : 0,
                type: keep(entry.isSeparator ? "separator" : nil),
                icon_png: icon,
                icon_png_size: Int32(entry.iconPNG.count)
            )
        }
        // The pixel buffers, like the strings, only have to last the call (the C side copies them).
        let pixels = look.pixmaps.map { pixmap in
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, pixmap.argb.count))
            _ = buffer.initialize(from: pixmap.argb)
            return (pixmap, buffer)
        }
        defer { for (_, buffer) in pixels { buffer.deallocate() } }
        let cPixmaps = pixels.map { pixmap, buffer in
            lanyard_pixmap(width: pixmap.width, height: pixmap.height, argb: UnsafePointer(buffer.baseAddress))
        }
        cPixmaps.withUnsafeBufferPointer { pixmaps in
            var cLook = lanyard_item_look(
                status: keep(look.status),
                icon_name: keep(look.iconName),
                pixmaps: pixmaps.baseAddress,
                pixmap_count: Int32(pixmaps.count),
                title: keep(look.title),
                tooltip_title: keep(look.tooltipTitle),
                tooltip_body: keep(look.tooltipBody),
                label: keep(look.label),
                label_guide: keep(look.labelGuide)
            )
            items.withUnsafeBufferPointer {
                lanyard_status_notifier_update(handle, $0.baseAddress, Int32($0.count), &cLook)
            }
        }
    }

    /// The menu's layout revision last published.
    package var revision: UInt32 { lanyard_status_notifier_revision(handle) }

    /// Takes the item off the bus and ends `events`. Call once.
    package func stop() {
        lanyard_status_notifier_stop(handle)
        sink.continuation.finish()
    }
}
