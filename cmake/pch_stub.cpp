// Compiles nothing: the object library around it builds a precompiled header
// (cmake/precompiled_headers.cmake).
