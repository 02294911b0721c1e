import LanyardCLI
import Foundation

exit(lanyardMain())
