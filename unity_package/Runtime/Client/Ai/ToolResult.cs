using System;
using Newtonsoft.Json.Converters;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>What a game tool gives back to the model; Success false is a failure the model sees.</summary>
    public sealed class ToolResult
    {
        /// <summary>A result.</summary>
        public ToolResult(bool success, string content)
        {
            Success = success;
            Content = content ?? "";
        }

        /// <summary>True when the tool did what was asked.</summary>
        public bool Success { get; }

        /// <summary>What the model reads.</summary>
        public string Content { get; }

        /// <summary>A success with this content.</summary>
        public static ToolResult Ok(string content)
        {
            return new ToolResult(true, content);
        }

        /// <summary>A failure with this explanation.</summary>
        public static ToolResult Fail(string content)
        {
            return new ToolResult(false, content);
        }
    }
}
