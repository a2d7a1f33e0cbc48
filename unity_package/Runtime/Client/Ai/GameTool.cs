using System;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Converters;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>A tool the game executes (docs/game-tools.md): its declaration and its handler.</summary>
    public sealed class GameTool
    {
        private readonly Func<string, CancellationToken, Task<ToolResult>> _invoke;

        internal GameTool(string name, string description, string parametersJsonSchema, bool runOnMainThread,
            Func<string, CancellationToken, Task<ToolResult>> invoke)
        {
            Name = name;
            Description = description;
            ParametersJsonSchema = parametersJsonSchema;
            RunOnMainThread = runOnMainThread;
            _invoke = invoke;
        }

        /// <summary>The tool name the model calls.</summary>
        public string Name { get; }

        /// <summary>What the tool does (shown to the model).</summary>
        public string Description { get; }

        /// <summary>The JSON Schema of the arguments.</summary>
        public string ParametersJsonSchema { get; }

        /// <summary>True: the handler runs on the SynchronizationContext of the turn's caller (Unity's main thread).</summary>
        public bool RunOnMainThread { get; }

        /// <summary>A typed tool: arguments parsed into TArgs, handler's result (or exception) as the tool's result.</summary>
        /// <remarks>TArgs is constructed with its parameterless constructor and then filled in: the constructor is referenced
        /// here, so IL2CPP's linker keeps it (reflection alone would not); [Preserve] on TArgs keeps its fields.</remarks>
        public static GameTool Create<TArgs>(string name, string description,
            Func<TArgs, CancellationToken, Task<ToolResult>> handler, bool runOnMainThread = true)
            where TArgs : new()
        {
            if (string.IsNullOrWhiteSpace(name)) throw new ArgumentException("a tool needs a name", "name");
            if (string.IsNullOrWhiteSpace(description)) throw new ArgumentException("a tool needs a description", "description");
            if (handler == null) throw new ArgumentNullException("handler");
            string schema = ToolSchema.For(typeof(TArgs));
            Func<string, CancellationToken, Task<ToolResult>> invoke = (json, token) =>
                handler(ToolSchema.Populate(new TArgs(), json), token);
            return new GameTool(name.Trim(), description.Trim(), schema, runOnMainThread, invoke);
        }

        /// <summary>Run the handler with the call's arguments; an exception becomes a failed result.</summary>
        public async Task<ToolResult> InvokeAsync(string argumentsJson, CancellationToken cancellationToken)
        {
            try
            {
                Task<ToolResult> running = _invoke(argumentsJson ?? "{}", cancellationToken);
                ToolResult result = running == null ? null : await running;
                return result ?? ToolResult.Ok("DONE");
            }
            catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
            {
                throw;
            }
            catch (Exception e)
            {
                string detail = (e.Message ?? "").Trim();
                return ToolResult.Fail("tool '" + Name + "' failed: " + e.GetType().Name + (detail.Length > 0 ? ": " + detail : ""));
            }
        }

        internal V1.ClientToolDefinition ToProto()
        {
            return new V1.ClientToolDefinition { Name = Name, Description = Description, ParametersJsonSchema = ParametersJsonSchema };
        }
    }
}
