using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>Conversions between the familiar API's types and the generated proto DTOs (pure, no I/O).</summary>
    internal static class ProtoMapping
    {
        /// <summary>The proto scope (null: empty).</summary>
        public static V1.AgentMemoryScopeProto ToProto(AgentMemoryScope scope)
        {
            scope = scope ?? AgentMemoryScope.Empty;
            return new V1.AgentMemoryScopeProto { TenantId = scope.TenantId, UserId = scope.UserId, SessionId = scope.SessionId, TopicId = scope.TopicId };
        }

        /// <summary>The familiar scope of a proto scope (null: empty).</summary>
        public static AgentMemoryScope FromProto(V1.AgentMemoryScopeProto scope)
        {
            return scope == null ? AgentMemoryScope.Empty : new AgentMemoryScope(scope.TenantId, scope.UserId, scope.SessionId, scope.TopicId);
        }

        /// <summary>The target of one call. The role is sent as given: the runtime trims it and refuses a blank one.</summary>
        public static V1.AgentTarget Target(string roleId, AgentMemoryScope scope, string actor)
        {
            return new V1.AgentTarget { RoleId = roleId ?? "", Scope = ToProto(scope), Actor = actor ?? "" };
        }

        /// <summary>The proto action of a default action.</summary>
        public static V1.MemoryToolActionProto ToProto(MemoryToolAction action)
        {
            switch (action)
            {
                case MemoryToolAction.Write: return V1.MemoryToolActionProto.Write;
                case MemoryToolAction.Append: return V1.MemoryToolActionProto.Append;
                case MemoryToolAction.Clear: return V1.MemoryToolActionProto.Clear;
                case MemoryToolAction.StrReplace: return V1.MemoryToolActionProto.StrReplace;
                case MemoryToolAction.Insert: return V1.MemoryToolActionProto.Insert;
                case MemoryToolAction.Delete: return V1.MemoryToolActionProto.Delete;
                case MemoryToolAction.Rename: return V1.MemoryToolActionProto.Rename;
                default: throw new ArgumentOutOfRangeException("action", action, "unknown MemoryToolAction");
            }
        }

        /// <summary>The familiar action of a proto action (UNSPECIFIED: Append).</summary>
        public static MemoryToolAction FromProto(V1.MemoryToolActionProto action)
        {
            switch (action)
            {
                case V1.MemoryToolActionProto.Write: return MemoryToolAction.Write;
                case V1.MemoryToolActionProto.Clear: return MemoryToolAction.Clear;
                case V1.MemoryToolActionProto.StrReplace: return MemoryToolAction.StrReplace;
                case V1.MemoryToolActionProto.Insert: return MemoryToolAction.Insert;
                case V1.MemoryToolActionProto.Delete: return MemoryToolAction.Delete;
                case V1.MemoryToolActionProto.Rename: return MemoryToolAction.Rename;
                default: return MemoryToolAction.Append;
            }
        }

        /// <summary>The proto twin of a tool-result mode.</summary>
        public static V1.ToolResultMemoryProto ToProto(ToolResultMemory mode)
        {
            switch (mode)
            {
                case ToolResultMemory.None: return V1.ToolResultMemoryProto.None;
                case ToolResultMemory.ErrorsOnly: return V1.ToolResultMemoryProto.ErrorsOnly;
                case ToolResultMemory.Full: return V1.ToolResultMemoryProto.Full;
                default: return V1.ToolResultMemoryProto.CompactSummary;
            }
        }

        /// <summary>The familiar twin of a proto tool-result mode (UNSPECIFIED: CompactSummary).</summary>
        public static ToolResultMemory FromProto(V1.ToolResultMemoryProto mode)
        {
            switch (mode)
            {
                case V1.ToolResultMemoryProto.None: return ToolResultMemory.None;
                case V1.ToolResultMemoryProto.ErrorsOnly: return ToolResultMemory.ErrorsOnly;
                case V1.ToolResultMemoryProto.Full: return ToolResultMemory.Full;
                default: return ToolResultMemory.CompactSummary;
            }
        }

        /// <summary>The whole config as a ConfigureRole patch (every field set, so the runtime holds exactly it).</summary>
        public static V1.RoleMemoryConfigProto ToProto(RoleMemoryConfig c)
        {
            return new V1.RoleMemoryConfigProto
            {
                RoleId = c.RoleId,
                UseMemoryTool = c.UseMemoryTool,
                DefaultAction = ToProto(c.DefaultAction),
                WithChatHistory = c.WithChatHistory,
                PersistChatHistory = c.PersistChatHistory,
                MaxChatHistoryMessages = c.MaxChatHistoryMessages,
                ContextTokens = c.ContextTokens,
                MaxOutputTokens = c.MaxOutputTokens,
                MaxToolCallRoundtrips = c.MaxToolCallRoundtrips,
                ToolResultMemory = ToProto(c.ToolResultMemory),
                Temperature = c.Temperature,
                UseLlmContextCompaction = c.UseLlmContextCompaction,
                CompactionTriggerRatio = c.CompactionTriggerRatio,
                MaxMemoryChars = c.MaxMemoryChars,
                SystemPrompt = c.SystemPrompt,
                SendEarlierSessions = c.SendEarlierSessions,
            };
        }

        /// <summary>The familiar config of the runtime's answer (unset fields get the defaults).</summary>
        public static RoleMemoryConfig FromProto(V1.RoleMemoryConfigProto p)
        {
            var c = new RoleMemoryConfig(p.RoleId);
            if (p.UseMemoryTool.HasValue) c.UseMemoryTool = p.UseMemoryTool.Value;
            c.DefaultAction = FromProto(p.DefaultAction);
            if (p.WithChatHistory.HasValue) c.WithChatHistory = p.WithChatHistory.Value;
            if (p.PersistChatHistory.HasValue) c.PersistChatHistory = p.PersistChatHistory.Value;
            if (p.MaxChatHistoryMessages.HasValue) c.MaxChatHistoryMessages = p.MaxChatHistoryMessages.Value;
            if (p.ContextTokens.HasValue) c.ContextTokens = p.ContextTokens.Value;
            c.MaxOutputTokens = p.MaxOutputTokens;
            c.MaxToolCallRoundtrips = p.MaxToolCallRoundtrips;
            c.ToolResultMemory = FromProto(p.ToolResultMemory);
            c.Temperature = p.Temperature;
            if (p.UseLlmContextCompaction.HasValue) c.UseLlmContextCompaction = p.UseLlmContextCompaction.Value;
            c.CompactionTriggerRatio = p.CompactionTriggerRatio;
            c.MaxMemoryChars = p.MaxMemoryChars;
            c.SystemPrompt = p.SystemPrompt ?? "";
            c.SendEarlierSessions = p.SendEarlierSessions;
            return c;
        }

        /// <summary>The familiar state of a proto state.</summary>
        public static AgentMemoryState FromProto(V1.AgentMemoryStateProto p)
        {
            var state = new AgentMemoryState
            {
                Memory = p.Memory ?? "",
                LastSystemPrompt = p.LastSystemPrompt ?? "",
                SystemPromptMemorySnapshot = p.SystemPromptMemorySnapshot ?? "",
                SystemPromptMemoryVersion = p.SystemPromptMemoryVersion,
                MaxMemoryVersions = p.MaxMemoryVersions,
            };
            foreach (V1.MemoryVersion v in p.Versions)
            {
                state.Versions.Add(FromProto(v));
            }
            return state;
        }

        /// <summary>The proto state of a familiar state.</summary>
        public static V1.AgentMemoryStateProto ToProto(AgentMemoryState s)
        {
            var p = new V1.AgentMemoryStateProto
            {
                Memory = s.Memory ?? "",
                LastSystemPrompt = s.LastSystemPrompt ?? "",
                SystemPromptMemorySnapshot = s.SystemPromptMemorySnapshot ?? "",
                SystemPromptMemoryVersion = s.SystemPromptMemoryVersion,
                MaxMemoryVersions = s.MaxMemoryVersions,
            };
            if (s.Versions != null)
            {
                foreach (AgentMemoryVersion v in s.Versions)
                {
                    p.Versions.Add(new V1.MemoryVersion { Version = v.Version, Timestamp = v.Timestamp, Action = v.Action ?? "", ContentAfter = v.ContentAfter ?? "", Note = v.Note ?? "" });
                }
            }
            return p;
        }

        /// <summary>The familiar version of a proto version.</summary>
        public static AgentMemoryVersion FromProto(V1.MemoryVersion v)
        {
            return new AgentMemoryVersion { Version = v.Version, Timestamp = v.Timestamp, Action = v.Action ?? "", ContentAfter = v.ContentAfter ?? "", Note = v.Note ?? "" };
        }

        /// <summary>The familiar chat message of a proto one.</summary>
        public static ChatMessage FromProto(V1.ChatMessageProto m)
        {
            return new ChatMessage { Role = m.Role ?? "", Content = m.Content ?? "", Timestamp = m.Timestamp, Order = m.Order };
        }

        /// <summary>The familiar tool result of a proto one.</summary>
        public static MemoryToolResult FromProto(V1.MemoryToolResultProto r)
        {
            return new MemoryToolResult
            {
                Success = r.Success,
                Message = r.Message ?? "",
                Error = r.Error ?? "",
                Version = r.Version,
                MemoryLength = r.MemoryLength,
                Memory = r.Memory,
                ResultJson = r.ResultJson ?? "",
            };
        }

        /// <summary>The proto request of a memory tool call.</summary>
        public static V1.ApplyMemoryToolRequest ToProto(V1.AgentTarget target, MemoryToolCall call)
        {
            if (call == null)
            {
                throw new ArgumentNullException("call");
            }
            return new V1.ApplyMemoryToolRequest
            {
                Target = target,
                Action = call.Action ?? "",
                Content = call.Content,
                OldText = call.OldText,
                NewText = call.NewText,
                Anchor = call.Anchor,
                Line = call.Line,
                ReplaceAll = call.ReplaceAll,
            };
        }

        /// <summary>The proto turn request of an AiTaskRequest (scope and actor already resolved).</summary>
        public static V1.RunTaskRequest ToProto(AiTaskRequest r, AgentMemoryScope scope)
        {
            var p = new V1.RunTaskRequest
            {
                Target = Target(r.RoleId, scope, r.Actor),
                Hint = r.Hint ?? "",
                SourceTag = r.SourceTag ?? "",
                TraceId = r.TraceId ?? "",
                RequestSystemInstructions = r.RequestSystemInstructions ?? "",
                ForcedToolMode = ForcedTool(r),
                MaxOutputTokens = r.MaxOutputTokens,
                WorldState = r.WorldState ?? "",
                Temperature = r.Temperature,
                TimeoutMs = r.Timeout.HasValue ? Milliseconds(r.Timeout.Value) : 0,
                ClientToolTimeoutMs = r.ClientToolTimeout.HasValue ? Milliseconds(r.ClientToolTimeout.Value) : 0,
                WaitMemoryWrite = r.WaitForMemoryWrite,
            };
            if (r.AllowedToolNames != null)
            {
                p.AllowedToolNames = new V1.ToolNameList { Names = new List<string>(r.AllowedToolNames) };
            }
            return p;
        }

        /// <summary>A timeout in the proto's milliseconds: rounded up, Timeout.InfiniteTimeSpan (and anything longer) as int.MaxValue.</summary>
        public static int Milliseconds(TimeSpan timeout)
        {
            if (timeout == System.Threading.Timeout.InfiniteTimeSpan) return int.MaxValue;
            return (int)Math.Max(-1, Math.Min(int.MaxValue, Math.Ceiling(timeout.TotalMilliseconds)));  // negative: refused by the runtime
        }

        /// <summary>The runtime's forced_tool_mode: a tool name, "required", "none", or "" (the model decides).</summary>
        public static string ForcedTool(AiTaskRequest r)
        {
            if (!string.IsNullOrWhiteSpace(r.ForcedToolName))
            {
                return r.ForcedToolName.Trim();
            }
            switch (r.ForcedToolMode)
            {
                case ForcedToolMode.Auto: return "";
                case ForcedToolMode.None: return "none";
                case ForcedToolMode.Required: return "required";
                default: throw new ArgumentOutOfRangeException("ForcedToolMode", r.ForcedToolMode, "unknown ForcedToolMode");
            }
        }

        /// <summary>The familiar result of a turn response.</summary>
        public static AiTaskResult FromProto(V1.RunTaskResponse p)
        {
            var result = new AiTaskResult
            {
                Status = FromProto(p.Status),
                Text = p.Text ?? "",
                Error = p.Error ?? "",
                TraceId = p.TraceId ?? "",
                CutReport = p.CutReport,
                Usage = p.Usage,
                MemoryWritePending = p.MemoryWritePending,
                MemoryWrite = p.MemoryWrite == null ? null : FromProto(p.MemoryWrite),
            };
            foreach (V1.ToolCallEvent call in p.ToolCalls)
            {
                result.ToolCalls.Add(FromProto(call));
            }
            foreach (V1.ToolResultEvent r in p.ToolResults)
            {
                result.ToolResults.Add(FromProto(r));
            }
            return result;
        }

        /// <summary>The familiar memory write of a proto message.</summary>
        public static AiMemoryWrite FromProto(V1.MemoryWrite p)
        {
            var write = new AiMemoryWrite
            {
                TraceId = p.TraceId ?? "", Changed = p.Changed, Reason = p.Reason ?? "", Version = p.Version,
                Summary = p.Summary ?? "",
            };
            foreach (V1.MemoryWriteLine line in p.Lines)
            {
                write.Lines.Add(new AiMemoryWriteLine { Stored = line.Stored ?? "", Replaced = line.Replaced ?? "" });
            }
            return write;
        }

        /// <summary>The familiar tool call of a proto event.</summary>
        public static AiToolCall FromProto(V1.ToolCallEvent e)
        {
            return new AiToolCall { CallId = e.CallId ?? "", Name = e.Name ?? "", ArgumentsJson = e.ArgumentsJson ?? "" };
        }

        /// <summary>The familiar tool result of a proto event.</summary>
        public static AiToolResult FromProto(V1.ToolResultEvent e)
        {
            return new AiToolResult { CallId = e.CallId ?? "", Name = e.Name ?? "", Success = e.Success, Content = e.Content ?? "" };
        }

        /// <summary>The familiar turn status.</summary>
        public static AiTaskStatus FromProto(V1.TurnStatus status)
        {
            switch (status)
            {
                case V1.TurnStatus.Ok: return AiTaskStatus.Ok;
                case V1.TurnStatus.TimedOut: return AiTaskStatus.TimedOut;
                case V1.TurnStatus.Cancelled: return AiTaskStatus.Cancelled;
                case V1.TurnStatus.ToolLoopEnded: return AiTaskStatus.ToolLoopEnded;
                default: return AiTaskStatus.Failed;
            }
        }
    }
}
