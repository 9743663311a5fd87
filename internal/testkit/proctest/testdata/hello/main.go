// Command hello prints hello: the smallest main package BuildTemp's test
// builds.
package main

import "fmt"

func main() { fmt.Println("hello") }
