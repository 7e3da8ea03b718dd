package messages

// ToolCode is a stable, model-visible classification of a tool failure
// (design §13.4). Tool errors never carry sensitive detail.
type ToolCode string

// Tool failure codes.
const (
	ToolInvalidArguments       ToolCode = "invalid_arguments"
	ToolInvalidURL             ToolCode = "invalid_url"
	ToolBlockedAddress         ToolCode = "blocked_address"
	ToolRedirectLimit          ToolCode = "redirect_limit"
	ToolDownloadTooLarge       ToolCode = "download_too_large"
	ToolUnsupportedContentType ToolCode = "unsupported_content_type"
	ToolTimeout                ToolCode = "timeout"
	ToolHTTPError              ToolCode = "http_error"
	ToolSearchUnavailable      ToolCode = "search_unavailable"
	ToolArtifactNotFound       ToolCode = "artifact_not_found"
	ToolConversionFailed       ToolCode = "conversion_failed"
	ToolOutputTooLarge         ToolCode = "output_too_large"
	ToolInvocationLimit        ToolCode = "invocation_limit"
	ToolFailed                 ToolCode = "tool_failed"
)

// ToolError is a tool failure the model may see: a code, a short safe
// message, and whether trying again might help.
type ToolError struct {
	Code      ToolCode
	Message   string
	Retryable bool
}

// Error implements error.
func (e *ToolError) Error() string { return string(e.Code) + ": " + e.Message }
